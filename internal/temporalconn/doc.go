// Package temporalconn is how the worker and the starter reach Temporal:
// one place that turns the command line, the environment and the temporal
// CLI's profile file into client options, applies the payload codec, and
// dials. Pointing either binary at a secured cluster or Temporal Cloud is
// then done the way it is done for the `temporal` CLI.
//
// The settings are read by the SDK's envconfig module, in this order (a
// later source replaces an earlier one, field by field):
//
//  1. the profile file: TEMPORAL_CONFIG_FILE, else
//     $XDG_CONFIG_HOME/temporalio/temporal.toml (~/.config/... by
//     default); a missing file is no error. The profile is TEMPORAL_PROFILE,
//     else "default"; naming a profile the file lacks is an error.
//  2. the environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
//     TEMPORAL_API_KEY, TEMPORAL_TLS (true/false, 1/0),
//     TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_CERT_DATA,
//     TEMPORAL_TLS_CLIENT_KEY_PATH, TEMPORAL_TLS_CLIENT_KEY_DATA,
//     TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_CA_CERT_DATA,
//     TEMPORAL_TLS_SERVER_NAME, TEMPORAL_TLS_DISABLE_HOST_VERIFICATION,
//     TEMPORAL_CLIENT_AUTHORITY and TEMPORAL_GRPC_META_<NAME> (a gRPC
//     header on every call). A variable that is set replaces the profile's
//     value even when empty (an empty boolean is ignored), and any
//     TEMPORAL_TLS_* variable that is set turns TLS on.
//  3. the flags -address and -namespace, when given.
//  4. the defaults: 127.0.0.1:7233 and namespace "default".
//
// The profile keys are those the temporal CLI writes:
//
//	[profile.NAME]
//	address = "host:port"
//	namespace = "..."
//	api_key = "..."
//	authority = "..."
//	grpc_meta = { header-name = "value" }
//	[profile.NAME.tls]
//	disabled = false
//	client_cert_path = "..."     # or client_cert_data = "PEM"
//	client_key_path = "..."      # or client_key_data = "PEM"
//	server_ca_cert_path = "..."  # or server_ca_cert_data = "PEM"
//	server_name = "..."
//	disable_host_verification = false
//
// TLS is on when the profile has a tls table, when any TEMPORAL_TLS_*
// variable is set, or when there is an API key; `disabled = true` or
// TEMPORAL_TLS=false turns it off. Without a CA the system roots verify the
// server, as for Temporal Cloud. The flags replace only the address and
// the namespace: TLS and credentials still come from the profile and the
// environment.
//
// The profile's codec table (and TEMPORAL_CODEC_ENDPOINT) is not used: a
// remote codec would be called on every payload of every replay. Payload
// encryption here is the local codec of package codec, turned on by
// KARVI_TEMPORAL_CODEC_KEY, and applied by Load to every client it
// configures.
//
// The task queue is not a Temporal connection setting but both binaries
// need the same one: -task-queue, else KARVI_EDDA_TASK_QUEUE, else the
// caller's default.
package temporalconn
