package devenv

import (
	"os"
	"path/filepath"
	"testing"
)

// The paths Binary returns are handed to processes that run elsewhere: the
// worker starts its conductor in each task's directory. A relative
// KARVI_EDDA_BIN or TEMPORAL_CLI (as a shell recipe writes them, "bin")
// must still name the binary from there.
func TestBinaryIsAbsoluteForARelativeSetting(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"eddasim", "temporal"} {
		if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bin", name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	t.Setenv("KARVI_EDDA_BIN", "bin")
	t.Setenv("TEMPORAL_CLI", filepath.Join("bin", "temporal"))
	for _, name := range []string{"eddasim", "temporal"} {
		got, err := Binary(name)
		if err != nil {
			t.Fatalf("Binary(%q): %v", name, err)
		}
		if want := filepath.Join(dir, "bin", name); got != want {
			t.Errorf("Binary(%q) = %q, want %q: a relative path names nothing from another directory", name, got, want)
		}
	}
}
