// Package redact masks secrets before text reaches Temporal history, a brief
// or a log line (docs/contract.md §9): values under sensitive key names and
// values that look like credentials are replaced by Mask, nothing of the
// original is kept, and nested objects are followed to depth 10.
//
// It is pure (no I/O, no globals that change) and runs on every conductor
// event, so the common case — a short line with nothing to mask — is a single
// byte scan with no allocation; regular expressions are deliberately not used
// because the whole scan has to stay well under a microsecond per line.
//
// What is masked:
//   - the value after a sensitive key name (api_key, token, secret, password,
//     passwd, authorization, credential, private_key, access_key, secret_key,
//     conn_string, and names that contain one of them as a word, such as
//     OPENAI_API_KEY, x-api-key, github_token, db_password, apiKey) in JSON
//     ("key": "value"), key=value, key: value and HTTP header form; the key is
//     kept so a reader still sees which setting was there;
//   - value patterns anywhere in text: sk-…, AKIA…, AIza…, ghp_/gho_/ghu_
//     tokens (plus the sibling formats ASIA…, ghs_/ghr_, github_pat_, xox?-,
//     glpat-, and JWTs), "Bearer <token>", PEM private key blocks, and runs of
//     40 or more base64/hex characters that look random;
//   - the password in URL user info (scheme://user:password@host).
//
// Decisions worth knowing (see also the comments at each rule):
//   - Every run of 40+ hex characters is masked, so a full 40-character git
//     commit SHA is masked; short SHAs (7-12) are not.
//   - For runs of 40+ base64 characters that are not pure hex, a cheap
//     statistical test separates random strings from long identifiers, paths
//     and kebab-case ids, which must survive. It misses well under 1% of
//     random 40-character base64/base62/base36 strings (fewer as they get
//     longer), and does not claim lowercase-only random text. The named
//     patterns and key names are the primary defence; this rule is the net.
//   - A key word only counts as a whole word of the key: "tokens_in",
//     "secretary" and "passwordless" are not sensitive. A key word followed by
//     a word that makes the value metadata ("token_usage", "token_count",
//     "password_file", "secret_name", ...) is not sensitive either; its value is
//     still scanned for value patterns.
//   - Under a sensitive key, booleans, null and the empty string are kept:
//     they cannot carry a secret, and masking them would suggest one was there.
//   - An allow list for false positives is offered (New); an opt-out that
//     turns redaction off is deliberately not provided.
package redact
