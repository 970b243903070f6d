package natsjstest

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// HubDomain is the JetStream domain of the hub that StartHub starts.
const HubDomain = "hub"

// Hub is a JetStream cluster of real nats-server servers in this process
// (domain hub, cluster hub), each with a leafnodes listener that does not
// advertise the others (no_advertise: a leaf must not reconnect around a
// cut a test makes), as docs/regions.md deploys it. A server can be
// stopped and started again on its ports and store.
type Hub struct {
	tb   testing.TB
	mu   sync.Mutex
	opts []*server.Options
	srvs []*server.Server
}

// StartHub starts a hub of n servers and waits until JetStream has a
// meta leader. Every server is shut down when the test ends.
func StartHub(tb testing.TB, n int) *Hub {
	tb.Helper()
	ports := freePorts(tb, 3*n)
	var routes []string
	for i := range n {
		routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(ports[n+i]))
	}
	h := &Hub{tb: tb}
	for i := range n {
		h.opts = append(h.opts, &server.Options{
			ServerName:             fmt.Sprintf("h%d", i+1),
			Host:                   "127.0.0.1",
			Port:                   ports[i],
			JetStream:              true,
			JetStreamDomain:        HubDomain,
			StoreDir:               tb.TempDir(),
			Cluster:                server.ClusterOpts{Name: "hub", Host: "127.0.0.1", Port: ports[n+i]},
			Routes:                 server.RoutesFromStr(strings.Join(routes, ",")),
			LeafNode:               server.LeafNodeOpts{Host: "127.0.0.1", Port: ports[2*n+i], NoAdvertise: true},
			NoSigs:                 true,
			DisableJetStreamBanner: true,
		})
		h.srvs = append(h.srvs, nil)
	}
	tb.Cleanup(func() {
		for i := range h.srvs {
			h.Stop(i)
		}
	})
	for i := range n {
		h.start(i, false)
	}
	for i := range n {
		h.waitReady(i)
	}
	h.WaitLeader(30 * time.Second)
	return h
}

// WaitLeader waits until the hub's JetStream has a meta leader that every
// running server follows, so that stream requests are answered.
func (h *Hub) WaitLeader(timeout time.Duration) {
	h.tb.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		leader, current := false, true
		h.mu.Lock()
		for _, s := range h.srvs {
			if s != nil {
				leader = leader || s.JetStreamIsLeader()
				current = current && s.JetStreamIsCurrent()
			}
		}
		h.mu.Unlock()
		if leader && current {
			return
		}
		if time.Now().After(deadline) {
			h.tb.Fatalf("the hub has no JetStream meta leader after %v", timeout)
		}
	}
}

// Start starts server i again (after Stop) on its ports and store, and
// waits until it accepts clients.
func (h *Hub) Start(i int) {
	h.tb.Helper()
	h.start(i, true)
}

func (h *Hub) start(i int, wait bool) {
	h.tb.Helper()
	o := *h.opts[i]
	s, err := server.NewServer(&o)
	if err != nil {
		h.tb.Fatalf("hub server %d: %v", i, err)
	}
	s.Start()
	h.mu.Lock()
	h.srvs[i] = s
	h.mu.Unlock()
	if wait {
		h.waitReady(i)
	}
}

func (h *Hub) waitReady(i int) {
	h.tb.Helper()
	if !h.srvs[i].ReadyForConnections(20 * time.Second) {
		h.tb.Fatalf("hub server %d is not ready", i)
	}
}

// Stop shuts server i down and waits until it has stopped (the in-process
// stand-in for killing it: its clients, routes and leaf links drop).
func (h *Hub) Stop(i int) {
	h.mu.Lock()
	s := h.srvs[i]
	h.srvs[i] = nil
	h.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Name is server i's name (as stream info reports leaders).
func (h *Hub) Name(i int) string { return h.opts[i].ServerName }

// URLs is the comma-separated client URLs of every server.
func (h *Hub) URLs() string {
	var u []string
	for _, o := range h.opts {
		u = append(u, "nats://127.0.0.1:"+strconv.Itoa(o.Port))
	}
	return strings.Join(u, ",")
}

func (h *Hub) leafAddrs() []string {
	var a []string
	for _, o := range h.opts {
		a = append(a, "127.0.0.1:"+strconv.Itoa(o.LeafNode.Port))
	}
	return a
}

// Region is a region's own JetStream server (domain Domain), a leaf node
// of a Hub whose link runs through proxies the test can cut.
type Region struct {
	Domain string
	srv    *server.Server
	links  []*Link
}

// StartRegion starts a regional server with its own JetStream domain and
// one leaf remote listing every hub server's leafnode listener, each
// reached through a Link. It waits until the leaf is connected. It is shut
// down when the test ends.
func StartRegion(tb testing.TB, h *Hub, domain string) *Region {
	tb.Helper()
	r := &Region{Domain: domain}
	var urls []*url.URL
	for _, a := range h.leafAddrs() {
		l := NewLink(tb, a)
		r.links = append(r.links, l)
		urls = append(urls, &url.URL{Scheme: "nats-leaf", Host: l.Addr()})
	}
	o := &server.Options{
		ServerName:             "region-" + domain,
		Host:                   "127.0.0.1",
		Port:                   freePorts(tb, 1)[0],
		JetStream:              true,
		JetStreamDomain:        domain,
		StoreDir:               tb.TempDir(),
		LeafNode:               server.LeafNodeOpts{Remotes: []*server.RemoteLeafOpts{{URLs: urls}}},
		NoSigs:                 true,
		DisableJetStreamBanner: true,
	}
	s, err := server.NewServer(o)
	if err != nil {
		tb.Fatalf("region %s: %v", domain, err)
	}
	s.Start()
	r.srv = s
	tb.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(20 * time.Second) {
		tb.Fatalf("region %s is not ready", domain)
	}
	r.WaitLinked(tb, 20*time.Second)
	return r
}

// URL is the regional server's client URL.
func (r *Region) URL() string { return r.srv.ClientURL() }

// Linked reports whether the leaf link to the hub is up.
func (r *Region) Linked() bool { return r.srv.NumLeafNodes() > 0 }

// WaitLinked waits until the leaf link is up.
func (r *Region) WaitLinked(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	for deadline := time.Now().Add(timeout); !r.Linked(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("region %s: leaf link not up after %v", r.Domain, timeout)
		}
	}
}

// Cut cuts the region off from the hub: every link refuses and drops its
// connections, as a WAN cut does.
func (r *Region) Cut() {
	for _, l := range r.links {
		l.Cut()
	}
}

// Restore lets the links carry connections again; the leaf reconnects on
// its own (within its reconnect interval, 1 s).
func (r *Region) Restore() {
	for _, l := range r.links {
		l.Restore()
	}
}

// Link is a TCP forwarder to one address that a test can cut and
// restore: while cut it listens no more and has closed every connection.
type Link struct {
	tb     testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewLink listens on a free loopback port and forwards to target. It is
// closed when the test ends.
func NewLink(tb testing.TB, target string) *Link {
	tb.Helper()
	l := &Link{tb: tb, target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	l.addr = ln.Addr().String()
	l.serve(ln)
	tb.Cleanup(func() {
		l.Cut()
		l.wg.Wait()
	})
	return l
}

// Addr is the address the link listens on.
func (l *Link) Addr() string { return l.addr }

func (l *Link) serve(ln net.Listener) {
	l.mu.Lock()
	l.ln = ln
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.forward(c)
			}()
		}
	}()
}

func (l *Link) forward(c net.Conn) {
	u, err := net.DialTimeout("tcp", l.target, time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !l.track(c, u) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src) //nolint:errcheck // a cut or a close ends it
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(u, c)
	go pipe(c, u)
	<-done
	<-done
	l.untrack(c, u)
}

// track records a forwarded pair; it closes them and reports false when
// the link was cut meanwhile.
func (l *Link) track(c ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln == nil {
		for _, x := range c {
			x.Close()
		}
		return false
	}
	for _, x := range c {
		l.conns[x] = struct{}{}
	}
	return true
}

func (l *Link) untrack(c ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range c {
		delete(l.conns, x)
	}
}

// Cut stops listening and closes every forwarded connection.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		l.ln.Close()
		l.ln = nil
	}
	for c := range l.conns {
		c.Close()
	}
}

// Restore listens on the link's address again.
func (l *Link) Restore() {
	l.tb.Helper()
	l.mu.Lock()
	cut := l.ln == nil
	l.mu.Unlock()
	if !cut {
		return
	}
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		l.tb.Fatalf("link %s: cannot listen again: %v", l.addr, err)
	}
	l.serve(ln)
}

// freePorts returns n loopback ports free now.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var (
		ports []int
		lns   []net.Listener
	)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}
