/*
Copyright The gpudra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package admission

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// Server serves the webhook over HTTPS, within the handler's Limits: no
// connection, header, body or answer may take longer than a review's
// time, and no more than MaxConnections are open at once.
type Server struct {
	srv      *http.Server
	maxConns int
}

const (
	// maxHeaderBytes bounds a request's headers: the API server sends a
	// few hundred bytes of them.
	maxHeaderBytes = 64 << 10
	// h2ReceiveBuffer is HTTP/2's flow-control window, per connection and
	// per stream: the least it allows.
	h2ReceiveBuffer = 64 << 10
)

// NewServer returns the HTTPS server for the webhook: the handler at
// ValidatePath, with the certificate tlsConfig gives. base, if set, is the
// context of every request.
func NewServer(h *Handler, tlsConfig *tls.Config, base context.Context) *Server {
	mux := http.NewServeMux()
	mux.Handle(ValidatePath, h)
	l := h.limits
	srv := &http.Server{
		Handler: mux,
		// Headers and body within the review's time (over HTTP/2, per
		// stream), and the answer written within a second more.
		ReadHeaderTimeout: l.Timeout,
		ReadTimeout:       l.Timeout,
		WriteTimeout:      l.Timeout + time.Second,
		// The API server keeps connections to reuse them.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: maxHeaderBytes,
		TLSConfig:      tlsConfig,
		// What HTTP/2 buffers of bodies no handler reads yet (a review
		// waiting for room in the budget) counts per connection, outside
		// the budget: 64 KiB, not the default 1 MiB, keeps it to
		// MaxConnections × 64 KiB.
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          100,
			MaxReceiveBufferPerConnection: h2ReceiveBuffer,
			MaxReceiveBufferPerStream:     h2ReceiveBuffer,
		},
	}
	if base != nil {
		srv.BaseContext = func(net.Listener) context.Context { return base }
	}
	return &Server{srv: srv, maxConns: l.MaxConnections}
}

// Serve serves HTTPS on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	return s.srv.ServeTLS(netutil.LimitListener(ln, s.maxConns), "", "")
}

// Shutdown stops the server, waiting for reviews in flight until ctx is
// done.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Close stops the server at once.
func (s *Server) Close() error { return s.srv.Close() }
