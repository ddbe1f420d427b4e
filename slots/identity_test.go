package slots

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func chained(r Request, chain string) Request { r.Key.Chain = chain; return r }

// A later workflow of the same task asks with its own chain's key: the
// pool answers it fresh, never with what it answered the earlier chain's
// attempt of the same number (released, or a grant it no longer counts).
func TestANewChainOfATaskIsAnsweredFresh(t *testing.T) {
	p := New(Limits{MaxConcurrent: 1})
	first := chained(req("a", 1), "0a1b2c3d")
	require.Equal(t, Granted, p.Acquire(first, at(0)).State)
	_, _ = p.Release(first.Key, at(1))
	require.Equal(t, Released, p.Acquire(first, at(2)).State, "a late repeat of the settled key")

	second := chained(req("a", 1), "ffee0011")
	require.Equal(t, Granted, p.Acquire(second, at(3)).State, "the new chain's attempt 1 is a new key")
	third := chained(req("a", 1), "12345678")
	require.Equal(t, Queued, p.Acquire(third, at(4)).State, "and counts against max_concurrent")
	require.NoError(t, p.Check())
	require.NotEqual(t, first.Key.UpdateID(), second.Key.UpdateID())
}

// Keys recorded before they had a chain read as they did: the same
// answer, the same update id.
func TestKeysWithoutAChainStillRead(t *testing.T) {
	var k Key
	require.NoError(t, json.Unmarshal([]byte(`{"task":"T5","attempt":2}`), &k))
	require.Equal(t, Key{Task: "T5", Attempt: 2}, k)
	require.Equal(t, "acquire/T5/2", k.UpdateID())
	data, err := json.Marshal(k)
	require.NoError(t, err)
	require.JSONEq(t, `{"task":"T5","attempt":2}`, string(data))
	var p Pool
	require.NoError(t, json.Unmarshal([]byte(`{"limits":{"maxConcurrent":1},"settled":[{"key":{"task":"T5","attempt":2},"answer":{"state":"released"}}]}`), &p))
	require.Equal(t, Released, p.Acquire(Request{Key: k}, at(0)).State)
	require.Equal(t, Granted, p.Acquire(Request{Key: Key{Task: "T5", Attempt: 2, Chain: "0a1b2c3d"}}, at(0)).State)
}
