package graph_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// npmPackage installs the JavaScript package of testdata/NAME (its
// package.json and package-lock.json, with npm ci) into a cache folder
// keyed by its files, and returns that folder: its other files are copied
// beside node_modules. Without npm the test is skipped, saying so; CI
// installs Node.js and npm, so there nothing is skipped.
func npmPackage(t *testing.T, name string) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no npm on PATH: CI must install Node.js and npm")
		}
		t.Skip("npm is not installed: the tests with real JavaScript peers (oidc-provider, graphql-codegen) need Node.js and npm")
	}
	npmMu.Lock()
	defer npmMu.Unlock()
	src := filepath.Join("testdata", name)
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	h := sha256.New()
	files := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		files[e.Name()] = b
		fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(b))
		h.Write(b)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "toolgate-tests", name+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, ".installed")); err == nil {
		return dir
	}
	// Installed beside, then moved in place: a run cut short leaves no
	// half-installed folder behind.
	tmp := dir + ".tmp"
	require.NoError(t, os.RemoveAll(tmp))
	require.NoError(t, os.MkdirAll(tmp, 0o755))
	for n, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(tmp, n), b, 0o644))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	cmd.Dir = tmp
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "npm ci in %s: %s", tmp, out)
	require.NoError(t, os.WriteFile(filepath.Join(tmp, ".installed"), nil, 0o644))
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.Rename(tmp, dir))
	return dir
}

var npmMu sync.Mutex

// freePort is a port nothing listens on at the moment.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// startNode runs `node SCRIPT ARGS...` in dir until the test ends and
// returns once it printed a line starting with ready; the rest of the
// line is returned.
func startNode(t *testing.T, dir, script string, args ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is not installed beside npm")
	cmd := exec.Command(node, append([]string{script}, args...)...)
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- rest
			}
		}
	}()
	select {
	case r := <-ready:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("node %s did not start: %s", script, stderr.String())
		return ""
	}
}
