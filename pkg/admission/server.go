package admission

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// NewServer returns the HTTPS server for the webhook: the handler at
// ValidatePath, with the certificate tlsConfig gives. base, if set, is the
// context of every request.
func NewServer(h Handler, tlsConfig *tls.Config, base context.Context) *http.Server {
	mux := http.NewServeMux()
	mux.Handle(ValidatePath, h)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         tlsConfig,
	}
	if base != nil {
		srv.BaseContext = func(net.Listener) context.Context { return base }
	}
	return srv
}
