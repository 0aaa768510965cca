package apiserver

import (
	"bytes"
	"compress/gzip"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
)

// elementsVersion is the vendored @stoplight/elements release (docsui/README.md); it is in
// the asset URLs, so browsers may cache them forever.
const elementsVersion = "9.0.25"

const docsAssetsPrefix = "/docs/assets/elements-" + elementsVersion + "/"

//go:embed docsui/web-components.min.js docsui/styles.min.css docsui/LICENSE docsui/web-components.min.js.LICENSE.txt
var docsUI embed.FS

// docsCSP allows nothing but this origin: the page works offline and cannot leak the
// reader's visit anywhere else. Elements injects inline styles, hence 'unsafe-inline' for
// styles only.
var docsCSP = strings.Join([]string{
	"default-src 'none'",
	"base-uri 'none'",
	"connect-src 'self'",
	"form-action 'none'",
	"frame-ancestors 'none'",
	"img-src 'self' data:",
	"font-src 'self' data:",
	"script-src 'self'",
	"style-src 'self' 'unsafe-inline'",
}, "; ")

var docsPage = []byte(`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="referrer" content="no-referrer">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Locker Network Service API Reference</title>
    <link rel="stylesheet" href="` + docsAssetsPrefix + `styles.min.css">
    <script src="` + docsAssetsPrefix + `web-components.min.js"></script>
  </head>
  <body style="height: 100vh;">
    <elements-api
      apiDescriptionUrl="/openapi.yaml"
      router="hash"
      layout="sidebar"
      tryItCredentialsPolicy="same-origin"
    ></elements-api>
  </body>
</html>
`)

// registerDocs serves the API reference at /docs with its UI from the binary, replacing
// huma's page, which loads the UI from a public CDN and is blank offline.
func registerDocs(r chi.Router) {
	r.Get("/docs", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Security-Policy", docsCSP)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(docsPage)
	})
	r.Get(docsAssetsPrefix+"{file}", serveDocsAsset)
}

// docsAssetGzip holds each asset compressed once: the script is 2 MB, 0.6 MB gzipped.
var docsAssetGzip sync.Map // file name -> []byte

func serveDocsAsset(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "file")
	data, err := fs.ReadFile(docsUI, path.Join("docsui", name))
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" || path.Ext(name) == ".txt" || name == "LICENSE" {
		ct = "text/plain; charset=utf-8"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Add("Vary", "Accept-Encoding")
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		gz, ok := docsAssetGzip.Load(name)
		if !ok {
			var b bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
			_, _ = zw.Write(data)
			_ = zw.Close()
			gz, _ = docsAssetGzip.LoadOrStore(name, b.Bytes())
		}
		h.Set("Content-Encoding", "gzip")
		data = gz.([]byte)
	}
	_, _ = w.Write(data)
}
