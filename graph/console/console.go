// Package console serves the admin console: a page of the binary's own
// (catalogue size against the ceilings, cost by month, budgets, turns and
// their transcripts) that reads nothing but the public GraphQL API with the
// API token its user signs in with. Its scripts (Preact and htm, vendored
// from npm with their licences) and styles are embedded, so it works
// offline, air-gapped and under a strict Content-Security-Policy: scripts
// and styles from this server only, no inline style, one inline script (the
// import map) allowed by its hash.
//
// The GraphQL documents it sends are the files of ops/, served beside the
// assets and run by the server's tests, so a schema change that breaks the
// console breaks a test.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

//go:embed ops/*.graphql
var ops embed.FS

// Operations returns the GraphQL documents the console sends, by name (the
// file's name without .graphql).
func Operations() map[string]string {
	entries, err := fs.ReadDir(ops, "ops")
	if err != nil {
		panic("console operations: " + err.Error())
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		b, err := fs.ReadFile(ops, "ops/"+e.Name())
		if err != nil {
			panic("console operation " + e.Name() + ": " + err.Error())
		}
		out[strings.TrimSuffix(e.Name(), ".graphql")] = string(b)
	}
	return out
}

// page is the console's HTML; {{…}} are filled by Handler.
const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>toolgate · admin</title>
<link rel="icon" href="data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Crect width='16' height='16' rx='4' fill='%234f46e5'/%3E%3Cpath d='M4 11h2V7H4zm3 0h2V4H7zm3 0h2V8h-2z' fill='white'/%3E%3C/svg%3E">
<link rel="stylesheet" href="{{base}}console.css">
<script type="importmap">{{importmap}}</script>
<script type="module" src="{{base}}app.js"></script>
</head>
<body data-endpoint="{{endpoint}}" data-ops="{{ops}}">
<div id="app"><noscript>The admin console needs JavaScript.</noscript></div>
</body>
</html>
`

// Handler serves the console's page at prefix (e.g. "/admin"), its assets
// below prefix+"/assets/" and its GraphQL documents below prefix+"/ops/",
// talking to the API at endpoint.
func Handler(prefix, endpoint string) http.Handler {
	base := prefix + "/assets/"
	importMap := fmt.Sprintf(`{"imports":{"preact":"%[1]spreact.mjs","preact/hooks":"%[1]shooks.mjs","htm":"%[1]shtm.mjs"}}`, base)
	attr := html.EscapeString
	page := []byte(strings.NewReplacer(
		"{{base}}", attr(base), "{{endpoint}}", attr(endpoint), "{{ops}}", attr(prefix+"/ops/"),
		// Script text, not HTML: it must not hold "</script".
		"{{importmap}}", strings.ReplaceAll(importMap, "</", `<\/`),
	).Replace(page))
	// The hash of the import map as the page holds it, escaping and all.
	m := inlineScript.FindSubmatch(page)
	if m == nil {
		panic("console page: no import map")
	}
	sum := sha256.Sum256(m[1])
	csp := strings.Join([]string{
		"default-src 'none'",
		"script-src 'self' 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'",
		"style-src 'self'",
		"img-src 'self' data:",
		"connect-src 'self'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")

	assetFS, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	opFS, err := fs.Sub(ops, "ops")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		_, _ = w.Write(page)
	})
	mux.Handle(prefix+"/", http.RedirectHandler(prefix, http.StatusMovedPermanently))
	mux.Handle(base, http.StripPrefix(base, files(assetFS)))
	mux.Handle(prefix+"/ops/", http.StripPrefix(prefix+"/ops/", files(opFS)))
	return mux
}

var inlineScript = regexp.MustCompile(`(?s)<script type="importmap">(.*?)</script>`)

// contentTypes are the types of the files served, by extension.
var contentTypes = map[string]string{
	".mjs":     "text/javascript; charset=utf-8",
	".js":      "text/javascript; charset=utf-8",
	".css":     "text/css; charset=utf-8",
	".graphql": "application/graphql; charset=utf-8",
}

// contentType is a served file's type; ok is false for a file not to serve.
func contentType(name string) (ctype string, ok bool) {
	if strings.HasPrefix(name, "LICENSE.") {
		return "text/plain; charset=utf-8", true
	}
	ctype, ok = contentTypes[path.Ext(name)]
	return ctype, ok
}

// files serves the files of fsys with an ETag of their content: the browser
// revalidates (they change with the binary) and gets 304 when they did not.
func files(fsys fs.FS) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path
		ctype, known := contentType(name)
		b, err := fs.ReadFile(fsys, name)
		if !known || err != nil || strings.Contains(name, "/") {
			http.NotFound(w, r)
			return
		}
		sum := sha256.Sum256(b)
		h := w.Header()
		h.Set("Content-Type", ctype)
		h.Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	})
}
