// Package playground serves GraphiQL from the binary: its scripts and
// styles are embedded (with their licences), so the page works offline,
// air-gapped and under a strict Content-Security-Policy.
package playground

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
)

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("playground").Parse(pageHTML))

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
// prefill the Headers pane. The page signs in from its address as the
// admin console does: /playground#token=TOKEN puts the token in the Headers
// pane and takes it out of the address bar. Headers are kept in the
// browser across reloads, and the schema is fetched once a token is there
// (a fetch without one would only be refused, leaving Docs empty).
func Handler(title, prefix, endpoint string, headers map[string]string) http.Handler {
	base := prefix + "/assets/"
	if headers == nil {
		headers = map[string]string{}
	}
	ui, err := json.Marshal(headers)
	if err != nil {
		panic(err)
	}
	ep, err := json.Marshal(endpoint)
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	err = pageTemplate.Execute(&buf, map[string]any{
		"title": title, "base": base,
		"reactJS": reactJS, "reactSRI": SRI(reactJS), "reactDOMJS": reactDOMJS, "reactDOMSRI": SRI(reactDOMJS),
		"graphiqlJS": graphiqlJS, "graphiqlSRI": SRI(graphiqlJS), "graphiqlCSS": graphiqlCSS, "graphiqlCSSSRI": SRI(graphiqlCSS),
		"explorerJS": explorerJS, "explorerSRI": SRI(explorerJS), "explorerCSS": explorerCSS, "explorerCSSSRI": SRI(explorerCSS),
		"endpoint": template.JS(ep), "headers": template.JS(ui),
	})
	if err != nil {
		panic("playground page: " + err.Error())
	}
	html := buf.Bytes()
	// The page is the same bytes for every request: render it once, and
	// allow exactly its inline scripts by hash.
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
