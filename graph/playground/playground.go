// Package playground serves GraphiQL from the binary: its scripts and
// styles are embedded (with their licences), so the page works offline,
// air-gapped and under a strict Content-Security-Policy.
package playground

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"

	gqlplayground "github.com/99designs/gqlgen/graphql/playground"
)

// The versions gqlgen's page loads from a CDN; the files are the npm
// packages' own, byte for byte, so their SRI hashes are the ones gqlgen
// pins (TestAssetsMatchGqlgenPins keeps them so).
//
//go:embed assets
var assets embed.FS

// Asset names, relative to assets/.
const (
	graphiqlJS  = "graphiql.min.js"             // graphiql@4.1.2
	graphiqlCSS = "graphiql.min.css"            // graphiql@4.1.2
	reactJS     = "react.production.min.js"     // react@18.2.0
	reactDOMJS  = "react-dom.production.min.js" // react-dom@18.2.0
	explorerJS  = "plugin-explorer.umd.js"      // @graphiql/plugin-explorer@4.0.6
	explorerCSS = "plugin-explorer.css"         // @graphiql/plugin-explorer@4.0.6
)

// SRI returns the Subresource Integrity value of an embedded asset.
func SRI(name string) string {
	b, err := fs.ReadFile(assets, "assets/"+name)
	if err != nil {
		panic("playground asset " + name + ": " + err.Error())
	}
	sum := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// Handler serves the GraphiQL page at prefix (e.g. "/playground") and its
// assets below prefix+"/assets/", pointed at endpoint, with headers to
// prefill the Headers pane.
func Handler(title, prefix, endpoint string, headers map[string]string) http.Handler {
	base := prefix + "/assets/"
	page := gqlplayground.Handler(title, endpoint,
		gqlplayground.WithGraphiqlVersion(base+graphiqlJS, base+graphiqlCSS, SRI(graphiqlJS), SRI(graphiqlCSS)),
		gqlplayground.WithGraphiqlReactVersion(base+reactJS, base+reactDOMJS, SRI(reactJS), SRI(reactDOMJS)),
		gqlplayground.WithGraphiqlPluginExplorerVersion(base+explorerJS, base+explorerCSS, SRI(explorerJS), SRI(explorerCSS)),
		gqlplayground.WithGraphiqlEnablePluginExplorer(true),
		gqlplayground.WithGraphiqlUiHeaders(headers),
	)
	// The page is the same bytes for every request: render it once, and
	// allow exactly its inline scripts by hash.
	rec := httptest.NewRecorder()
	page(rec, httptest.NewRequest(http.MethodGet, prefix, nil))
	html := rec.Body.Bytes()
	csp := policy(html)

	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix(base, http.FileServerFS(sub))
	mux := http.NewServeMux()
	mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(html)
	})
	mux.Handle(base, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	}))
	return mux
}

var inlineScript = regexp.MustCompile(`(?s)<script>(.*?)</script>`)

// policy is the page's Content-Security-Policy: scripts, styles, fonts and
// connections from this server only, and the page's own inline scripts by
// their hashes. GraphiQL sets styles inline, so styles may be inline.
func policy(html []byte) string {
	var hashes []string
	for _, m := range inlineScript.FindAllSubmatch(html, -1) {
		sum := sha256.Sum256(m[1])
		hashes = append(hashes, fmt.Sprintf("'sha256-%s'", base64.StdEncoding.EncodeToString(sum[:])))
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self' " + strings.Join(hashes, " "),
		"style-src 'self' 'unsafe-inline'",
		"img-src 'self' data:",
		"font-src 'self' data:",
		"connect-src 'self'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}
