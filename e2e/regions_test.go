package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// This file runs the regional topology of deploy/regions/ as child
// processes of a test: a hub of three clustered JetStream servers and one
// leaf server per region, rendered from deploy/regions/nats/*.conf.in as
// local.sh renders them. Each region's leaf link runs through a TCP proxy
// of the test's (linkProxy), so a row can cut a region off from the hub
// and give the link back without restarting any server.

// placeholder is a template's @KEY@.
var placeholder = regexp.MustCompile(`@[A-Z_]+@`)

// renderConf writes the template deploy/regions/nats/<name>.conf.in to out
// with each @KEY@ replaced by vars[KEY].
func renderConf(t *testing.T, name, out string, vars map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "regions", "nats", name+".conf.in"))
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for k, v := range vars {
		pairs = append(pairs, "@"+k+"@", v)
	}
	s := strings.NewReplacer(pairs...).Replace(string(b))
	if left := placeholder.FindString(s); left != "" {
		t.Fatalf("%s.conf.in: %s left unreplaced", name, left)
	}
	if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// linkProxy forwards TCP connections from a fixed loopback address to the
// first of its targets that accepts one: a region's leaf link to the hub.
// cut closes the listener and every connection through it (the region is
// cut off: the leaf's reconnects are refused); restore listens again.
type linkProxy struct {
	addr    string
	targets []string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	next  int
	wg    sync.WaitGroup
}

// startLinkProxy listens on a free port, forwarding to targets; it is
// stopped when the test ends.
func startLinkProxy(t *testing.T, targets []string) *linkProxy {
	t.Helper()
	p := &linkProxy{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), targets: targets, conns: map[net.Conn]struct{}{}}
	if err := p.restore(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

// restore listens on the proxy's address again (retrying while the port
// is briefly unavailable) and forwards what arrives.
func (p *linkProxy) restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("link proxy cannot listen on %s again: %w", p.addr, err)
	}
	p.ln = ln
	p.wg.Go(func() { p.accept(ln) })
	return nil
}

func (p *linkProxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

// forward connects c to the first target (round robin from the last one
// used) that accepts, and copies both ways until either side ends.
func (p *linkProxy) forward(c net.Conn) {
	var up net.Conn
	p.mu.Lock()
	start := p.next
	p.mu.Unlock()
	for k := range p.targets {
		i := (start + k) % len(p.targets)
		u, err := net.DialTimeout("tcp", p.targets[i], time.Second)
		if err == nil {
			up = u
			p.mu.Lock()
			p.next = i
			p.mu.Unlock()
			break
		}
	}
	if up == nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialling
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	c.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut stops listening and closes every connection through the proxy.
func (p *linkProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// brokers is the regional topology's nats-servers: hub[0..2] and one
// server per region, each region's leaf link through its proxy.
type brokers struct {
	t       *testing.T
	hub     []*server
	hubMon  []string // monitoring URLs
	regions map[string]*server
	regMon  map[string]string
	links   map[string]*linkProxy
}

// hubURL is the rollups' nats.url: every hub server.
func (b *brokers) hubURL() string {
	var urls []string
	for _, s := range b.hub {
		urls = append(urls, "nats://"+s.addr)
	}
	return strings.Join(urls, ",")
}

// regionURL is region r's agents' nats.url.
func (b *brokers) regionURL(r string) string { return "nats://" + b.regions[r].addr }

// startBrokers starts the hub of three, then a leaf server per region.
func startBrokers(t *testing.T, regions []string) *brokers {
	t.Helper()
	bin := natsServerBinary(t)
	dir := t.TempDir()
	b := &brokers{t: t, regions: map[string]*server{}, regMon: map[string]string{}, links: map[string]*linkProxy{}}
	const hubs = 3
	var ports, routePorts, leafPorts, httpPorts [hubs]int
	var routes, leafAddrs []string
	for i := range hubs {
		ports[i], routePorts[i], leafPorts[i], httpPorts[i] = freePort(t), freePort(t), freePort(t), freePort(t)
		routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats-route://127.0.0.1:%d", routePorts[i])))
		leafAddrs = append(leafAddrs, fmt.Sprintf("127.0.0.1:%d", leafPorts[i]))
	}
	// Each server on its own, then every one healthy: a clustered
	// server's health waits for a metadata leader, which needs two.
	for i := range hubs {
		name := fmt.Sprintf("hub-%d", i+1)
		conf := filepath.Join(dir, name+".conf")
		renderConf(t, "hub", conf, map[string]string{
			"NAME": name, "HOST": "127.0.0.1", "PORT": fmt.Sprint(ports[i]), "HTTP_PORT": fmt.Sprint(httpPorts[i]),
			"STORE_DIR": filepath.Join(dir, name), "CLUSTER": "hub", "CLUSTER_PORT": fmt.Sprint(routePorts[i]),
			"ROUTES": strings.Join(routes, ","), "LEAF_PORT": fmt.Sprint(leafPorts[i]),
		})
		mon := fmt.Sprintf("http://127.0.0.1:%d", httpPorts[i])
		b.hubMon = append(b.hubMon, mon)
		s := startServer(t, name, fmt.Sprintf("127.0.0.1:%d", ports[i]), []string{bin, "--config", conf}, func() error { return httpOK(mon + "/varz") })
		// Restarts (after a kill) wait for full health: the other two
		// run, so there is a leader to catch up from.
		s.ready = func() error { return httpOK(mon + "/healthz") }
		b.hub = append(b.hub, s)
	}
	for _, mon := range b.hubMon {
		waitFor(t, 60*time.Second, mon+"/healthz", func() error { return httpOK(mon + "/healthz") })
	}
	for _, r := range regions {
		link := startLinkProxy(t, leafAddrs)
		b.links[r] = link
		port, httpPort := freePort(t), freePort(t)
		name := "nats-" + r
		conf := filepath.Join(dir, name+".conf")
		renderConf(t, "region", conf, map[string]string{
			"NAME": name, "HOST": "127.0.0.1", "PORT": fmt.Sprint(port), "HTTP_PORT": fmt.Sprint(httpPort),
			"STORE_DIR": filepath.Join(dir, name), "DOMAIN": r, "LEAF_URLS": fmt.Sprintf("%q", "nats-leaf://"+link.addr),
		})
		mon := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
		b.regMon[r] = mon
		b.regions[r] = startServer(t, name, fmt.Sprintf("127.0.0.1:%d", port), []string{bin, "--config", conf}, func() error { return httpOK(mon + "/healthz") })
	}
	for _, r := range regions {
		b.waitLinked(r, 30*time.Second)
	}
	return b
}

// leafLinks returns how many leaf connections region r's server has.
func (b *brokers) leafLinks(r string) (int, error) {
	var lz struct {
		Leafnodes int `json:"leafnodes"`
	}
	err := getJSON(&http.Client{Timeout: 2 * time.Second}, b.regMon[r]+"/leafz", &lz)
	return lz.Leafnodes, err
}

// waitLinked waits until region r's server has its leaf link to the hub.
func (b *brokers) waitLinked(r string, d time.Duration) {
	b.t.Helper()
	waitFor(b.t, d, r+"'s leaf link to the hub", func() error {
		n, err := b.leafLinks(r)
		if err == nil && n == 0 {
			err = errors.New("no leaf connection")
		}
		return err
	})
}

// killHub SIGKILLs hub server i and waits until it is gone.
func (b *brokers) killHub(i int) {
	b.t.Helper()
	b.hub[i].kill()
}

// kill ends the server with SIGKILL and waits for it.
func (s *server) kill() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("%s does not run", s.name)
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatalf("cannot kill %s: %v", s.name, err)
	}
	<-s.done
	s.cmd = nil
}

// httpOK GETs url and wants 200.
func httpOK(url string) error {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s = %d", url, resp.StatusCode)
	}
	return nil
}

// waitFor polls f until it returns nil, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jsClient connects to a nats-server for the test's own looks at streams
// and consumers; it is closed when the test ends.
func jsClient(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestRegionalBrokerConfigs starts the brokers from deploy/regions/nats
// and checks what the topology rests on: the hub is one JetStream cluster
// with a metadata leader; each region's server is a leaf of the hub in a
// JetStream domain of its own; an R3 hub stream sources a regional stream
// durably (ADR-58) across the leaf link, and after a cut of that link
// under publishing the hub holds every message once.
func TestRegionalBrokerConfigs(t *testing.T) {
	b := startBrokers(t, []string{"us-east", "eu-west"})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var jsz struct {
		Config struct {
			Domain string `json:"domain"`
		} `json:"config"`
		Meta *struct {
			Leader   string `json:"leader"`
			Replicas []any  `json:"replicas"`
		} `json:"meta_cluster"`
	}
	if err := getJSON(&http.Client{Timeout: 2 * time.Second}, b.hubMon[0]+"/jsz", &jsz); err != nil {
		t.Fatal(err)
	}
	if jsz.Config.Domain != "hub" || jsz.Meta == nil || jsz.Meta.Leader == "" || len(jsz.Meta.Replicas) != 2 {
		t.Fatalf("hub-1 /jsz: domain %q, meta cluster %+v; want domain hub and a leader with 2 other peers", jsz.Config.Domain, jsz.Meta)
	}

	// A regional stream (limits retention, as the agents' is) and the
	// durable push consumer the hub sources through.
	reg := jsClient(t, b.regionURL("us-east"))
	if _, err := reg.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"cfg.us-east.>"}, Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.CreateOrUpdatePushConsumer(ctx, "R", jetstream.ConsumerConfig{Durable: "hub", DeliverSubject: "hub.src.us-east", AckPolicy: jetstream.AckFlowControlPolicy, FlowControl: true, IdleHeartbeat: time.Second, MaxAckPending: 10000}); err != nil {
		t.Fatal(err)
	}
	hub := jsClient(t, b.hubURL())
	if _, err := hub.CreateStream(ctx, jetstream.StreamConfig{Name: "HUB", Replicas: 3, Duplicates: 2 * time.Minute, Storage: jetstream.FileStorage,
		Sources: []*jetstream.StreamSource{{Name: "R", Domain: "us-east", Consumer: &jetstream.StreamConsumerSource{Name: "hub", DeliverSubject: "hub.src.us-east"}}}}); err != nil {
		t.Fatal(err)
	}
	// From the hub, the region's stream is reached through its domain.
	remote, err := jetstream.NewWithDomain(hub.Conn(), "us-east")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Stream(ctx, "R"); err != nil {
		t.Fatalf("the us-east domain's stream, seen from the hub: %v", err)
	}

	const n = 600
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := reg.Publish(ctx, fmt.Sprintf("cfg.us-east.%d", i%4), []byte("m"), jetstream.WithMsgID(fmt.Sprintf("us-east-%d", i))); err != nil {
				t.Fatalf("publish %d in us-east: %v", i, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	hubMsgs := func() uint64 {
		s, err := hub.Stream(ctx, "HUB")
		if err != nil {
			return 0
		}
		info, err := s.Info(ctx)
		if err != nil {
			return 0
		}
		return info.State.Msgs
	}
	publish(0, n/3)
	waitFor(t, 30*time.Second, "the hub holds the first third", func() error {
		if got := hubMsgs(); got != n/3 {
			return fmt.Errorf("%d messages", got)
		}
		return nil
	})
	b.links["us-east"].cut()
	publish(n/3, 2*n/3) // acknowledged by the region alone
	if got := hubMsgs(); got != n/3 {
		t.Fatalf("the hub holds %d messages while us-east is cut off, want %d", got, n/3)
	}
	if err := b.links["us-east"].restore(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	publish(2*n/3, n)
	waitFor(t, 30*time.Second, "the hub holds every message", func() error {
		if got := hubMsgs(); got != n {
			return fmt.Errorf("%d of %d messages", got, n)
		}
		return nil
	})
	t.Logf("the hub held all %d messages %v after the link returned", n, time.Since(back).Round(10*time.Millisecond))
	// Once: a second look after a while finds no more.
	time.Sleep(2 * time.Second)
	if got := hubMsgs(); got != n {
		t.Fatalf("the hub holds %d messages, want %d once each", got, n)
	}
}
