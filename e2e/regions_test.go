package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
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
		waitFor(t, 3*time.Minute, mon+"/healthz", func() error { return httpOK(mon + "/healthz") })
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

// consumerInfo returns push consumer durable of stream's state.
func consumerInfo(ctx context.Context, js jetstream.JetStream, stream, durable string) (*jetstream.ConsumerInfo, error) {
	c, err := js.PushConsumer(ctx, stream, durable)
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// ackFloor returns the stream sequence up to which consumer durable of
// stream has every message acknowledged.
func ackFloor(ctx context.Context, js jetstream.JetStream, stream, durable string) (uint64, error) {
	info, err := consumerInfo(ctx, js, stream, durable)
	if err != nil {
		return 0, err
	}
	return info.AckFloor.Stream, nil
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
	// G16's measure: the hub holds the region's backlog once the origin's
	// durable consumer has every message up to the one last published
	// before the link returned acknowledged by the hub.
	backlog := uint64(2 * n / 3)
	caught := make(chan time.Duration, 1)
	go func() {
		for time.Since(back) < 30*time.Second {
			if floor, err := ackFloor(ctx, reg, "R", "hub"); err == nil && floor >= backlog {
				caught <- time.Since(back)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		close(caught)
	}()
	publish(2*n/3, n)
	waitFor(t, 30*time.Second, "the hub holds every message", func() error {
		if got := hubMsgs(); got != n {
			return fmt.Errorf("%d of %d messages", got, n)
		}
		return nil
	})
	t.Logf("the hub held all %d messages %v after the link returned", n, time.Since(back).Round(10*time.Millisecond))
	d, ok := <-caught
	if !ok {
		t.Fatal("the origin's consumer never acknowledged the backlog, though the hub holds it")
	}
	t.Logf("the hub acknowledged the %d-message backlog %v after the link returned", backlog, d.Round(10*time.Millisecond))
	// Once: a second look after a while finds no more.
	time.Sleep(2 * time.Second)
	if got := hubMsgs(); got != n {
		t.Fatalf("the hub holds %d messages, want %d once each", got, n)
	}
}

// The topology's regions and the Cassandra data centre each maps to, as
// deploy/regions/local.sh runs them: three regions on two data centres,
// the rollups in dc1.
var (
	topologyRegions = []string{"us-east", "eu-west", "ap-south"}
	topologyDC      = map[string]string{"us-east": "dc1", "eu-west": "dc2", "ap-south": "dc2"}
)

const rollupDC = "dc1"

// cassCluster is a Cassandra cluster of two data centres, one node each.
type cassCluster struct {
	t     *testing.T
	hosts map[string]string // data centre → node address (CQL port 9042)
	// env runs scripts/cassandra-cluster.sh on this cluster; nil for a
	// cluster the test did not start (it must not stop that one).
	env []string
	// user and password log in when the cluster authenticates
	// (EDGECOUNT_CASSANDRA_CLUSTER_AUTH=password, as scripts/test.sh
	// starts it): the default superuser.
	user, password string
}

// credentials returns the settings that log in to the cluster, if any.
func (c *cassCluster) credentials() []string {
	if c.user == "" {
		return nil
	}
	return []string{"EDGECOUNT_CASSANDRA_USERNAME=" + c.user, "EDGECOUNT_CASSANDRA_PASSWORD=" + c.password}
}

// contactPoints is the cassandra.hosts of every process: both nodes.
func (c *cassCluster) contactPoints() string { return c.hosts["dc1"] + ", " + c.hosts["dc2"] }

// sharedCluster is the cluster scripts/test.sh starts (and
// scripts/cassandra-cluster.sh up by default): EDGECOUNT_CASSANDRA_CLUSTER,
// node 1 (dc1) first. Tests use keyspaces of their own on it and stop
// nothing.
func sharedCluster(t *testing.T) *cassCluster {
	t.Helper()
	v := testenv.Addr("EDGECOUNT_CASSANDRA_CLUSTER", "127.0.0.11:9042,127.0.0.12:9042")
	nodes := strings.Split(v, ",")
	if len(nodes) != 2 {
		t.Fatalf("EDGECOUNT_CASSANDRA_CLUSTER=%s: want two nodes, dc1's and dc2's", v)
	}
	c := &cassCluster{t: t, hosts: map[string]string{}}
	if os.Getenv("EDGECOUNT_CASSANDRA_CLUSTER_AUTH") == "password" {
		c.user, c.password = "cassandra", "cassandra"
	}
	for i, n := range nodes {
		n = strings.TrimSpace(n)
		testenv.NeedService(t, "the two-DC Cassandra cluster", n, "./scripts/cassandra-cluster.sh up")
		host, _, err := net.SplitHostPort(n)
		if err != nil {
			t.Fatalf("EDGECOUNT_CASSANDRA_CLUSTER: %v", err)
		}
		c.hosts[fmt.Sprintf("dc%d", i+1)] = host
	}
	return c
}

// privateCluster starts a cluster of the test's own with
// scripts/cassandra-cluster.sh on base (127.0.0.N: nodes N and N+1), for
// a row that stops a data centre; it is brought down when the test ends.
func privateCluster(t *testing.T, base string) *cassCluster {
	t.Helper()
	parts := strings.Split(base, ".")
	last, _ := strconv.Atoi(parts[3])
	c := &cassCluster{t: t, hosts: map[string]string{
		"dc1": base, "dc2": fmt.Sprintf("127.0.0.%d", last+1),
	}}
	for _, h := range c.hosts {
		if conn, err := net.DialTimeout("tcp", h+":9042", time.Second); err == nil {
			conn.Close()
			t.Fatalf("something already answers on %s:9042; a private cluster needs free addresses", h)
		}
	}
	// No authentication: with one data centre down, a login could need
	// the other one's system_auth replica.
	c.env = append(os.Environ(), "EDGECOUNT_CASSANDRA_CLUSTER_BASE="+base,
		"EDGECOUNT_CASSANDRA_CLUSTER_DIR="+filepath.Join(t.TempDir(), "cluster"), "EDGECOUNT_CASSANDRA_CLUSTER_AUTH=")
	if os.Getenv("EDGECOUNT_CASSANDRA_TIMEOUT") == "" {
		// A node restarted on a loaded machine took over 240 s (load 55
		// on 2 cores): give each start up to 10 min.
		c.env = append(c.env, "EDGECOUNT_CASSANDRA_TIMEOUT=600")
	}
	t.Cleanup(func() {
		if out, err := c.script("down"); err != nil {
			t.Errorf("cassandra-cluster.sh down: %v\n%s", err, out)
		}
	})
	began := time.Now()
	out, err := c.script("up")
	if err != nil {
		t.Fatalf("cassandra-cluster.sh up: %v\n%s", err, out)
	}
	t.Logf("private Cassandra cluster on %s and %s up in %v:\n%s", c.hosts["dc1"], c.hosts["dc2"], time.Since(began).Round(time.Second), out)
	return c
}

// script runs scripts/cassandra-cluster.sh args on the cluster.
func (c *cassCluster) script(args ...string) ([]byte, error) {
	if c.env == nil {
		c.t.Fatal("the test did not start this cluster and must not run its script")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join("..", "scripts", "cassandra-cluster.sh"), args...)
	cmd.Env = c.env
	return cmd.CombinedOutput()
}

// stopDC stops data centre dc's node (SIGTERM: it drains) and returns how
// long that took; startDC starts it again on its data and waits for CQL.
func (c *cassCluster) stopDC(dc string) time.Duration {
	c.t.Helper()
	began := time.Now()
	if out, err := c.script("stop-dc", dc); err != nil {
		c.t.Fatalf("stop-dc %s: %v\n%s", dc, err, out)
	}
	return time.Since(began)
}

func (c *cassCluster) startDC(dc string) time.Duration {
	c.t.Helper()
	began := time.Now()
	if out, err := c.script("start-dc", dc); err != nil {
		c.t.Fatalf("start-dc %s: %v\n%s", dc, err, out)
	}
	return time.Since(began)
}

// regionOptions shape a regional row's system.
type regionOptions struct {
	agents  int          // per region (default 1)
	rollups int          // default 2
	cluster *cassCluster // default sharedCluster
	redis   string       // Redis address (default the shared one, EDGECOUNT_REDIS)
	// ackWait is the rollups' nats.ack_wait (default the config's, 30 s).
	ackWait time.Duration
}

// regionSystem is a row's system on the regional topology: brokers of
// its own (startBrokers), one agent per region on its region's server and
// data centre, and rollups on the hub in dc1, all processes of the test's,
// with a keyspace, stream and durable of the row's own.
type regionSystem struct {
	t                   *testing.T
	b                   *brokers
	cass                *cassCluster
	run                 string
	agentBin, rollupBin string
	cfg                 map[string]string // region (or "rollup") → config file
	agents              []*regionAgent
	rollups             []*proc
}

// regionAgent is one agent of a region.
type regionAgent struct {
	region string
	agentNode
}

func newRegionSystem(t *testing.T, o regionOptions) *regionSystem {
	t.Helper()
	if o.agents == 0 {
		o.agents = 1
	}
	if o.rollups == 0 {
		o.rollups = 2
	}
	redisAddr := o.redis
	if redisAddr == "" {
		redisAddr = testenv.Addr("EDGECOUNT_REDIS", "127.0.0.1:6379")
		testenv.NeedService(t, "Redis", redisAddr, "./scripts/redis.sh start")
	}
	if o.cluster == nil {
		o.cluster = sharedCluster(t)
	}
	s := &regionSystem{t: t, cass: o.cluster, run: fmt.Sprintf("rg%d", rand.Uint32()), cfg: map[string]string{}}
	s.agentBin, s.rollupBin = binaries(t)
	s.b = startBrokers(t, topologyRegions)
	login := ""
	if s.cass.user != "" {
		login = fmt.Sprintf("  username: %s\n  password: %s\n", s.cass.user, s.cass.password)
	}
	dir := t.TempDir()
	write := func(name, natsSection, dc string) {
		cfg := fmt.Sprintf(`region: %s
regions: [%s]
partitions: %d
agent:
  flush_interval: 200ms
nats:
%s  stream: %s
  subject_prefix: %s.sums
  durable: %s
redis:
  addr: %s
cassandra:
  hosts: [%s]
  port: 9042
  keyspace: %s
  local_dc: %s
  data_centers: {dc1: 1, dc2: 1}
  consistency: LOCAL_QUORUM
  timeout: %s
%s`, cmp.Or(name, "us-east"), strings.Join(topologyRegions, ", "), faultPartitions, natsSection,
			strings.ToUpper(s.run), s.run, s.run, redisAddr, s.cass.contactPoints(), s.run, dc, cassTimeout, login)
		file := filepath.Join(dir, cmp.Or(name, "rollup")+".yaml")
		if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		s.cfg[cmp.Or(name, "rollup")] = file
	}
	var sources strings.Builder
	for _, r := range topologyRegions {
		write(r, fmt.Sprintf("  url: %s\n  domain: %s\n", s.b.regionURL(r), r), topologyDC[r])
		fmt.Fprintf(&sources, "      - {region: %s, domain: %s}\n", r, r)
	}
	ackWait := ""
	if o.ackWait > 0 {
		ackWait = fmt.Sprintf("  ack_wait: %s\n", o.ackWait)
	}
	write("", fmt.Sprintf("  url: %s\n%s  hub:\n    replicas: 3\n    sources:\n%s", s.b.hubURL(), ackWait, sources.String()), rollupDC)
	for i := range o.rollups {
		s.rollups = append(s.rollups, nil)
		s.startRollup(i)
	}
	for _, r := range topologyRegions {
		for k := range o.agents {
			a := &regionAgent{region: r, agentNode: agentNode{
				id:   fmt.Sprintf("%s-%s-%d", r, s.run, k),
				addr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
				data: filepath.Join(t.TempDir(), "agent"),
			}}
			if err := os.MkdirAll(a.data, 0o750); err != nil {
				t.Fatal(err)
			}
			s.agents = append(s.agents, a)
			s.startAgent(len(s.agents) - 1)
		}
	}
	for _, a := range s.agents {
		waitReadyz(t, a.base())
	}
	return s
}

// startAgent starts agent i on its address, id and data directory.
func (s *regionSystem) startAgent(i int) {
	s.t.Helper()
	if err := s.launchAgent(i); err != nil {
		s.t.Fatal(err)
	}
}

// launchAgent is startAgent, returning its error: it may run on any
// goroutine (while it runs, nothing else may touch agent i).
func (s *regionSystem) launchAgent(i int) error {
	a := s.agents[i]
	p, err := launch(s.t, "edge-agent-"+a.id, nil, s.agentBin, "--config", s.cfg[a.region],
		"--http", a.addr, "--agent-id", a.id, "--data", a.data)
	a.p = p
	return err
}

// startRollup starts rollup i (a new group member each time).
func (s *regionSystem) startRollup(i int) {
	s.t.Helper()
	if err := s.launchRollup(i); err != nil {
		s.t.Fatal(err)
	}
}

// launchRollup is startRollup, returning its error: it may run on any
// goroutine (while it runs, nothing else may touch rollup i).
func (s *regionSystem) launchRollup(i int) error {
	p, err := launch(s.t, fmt.Sprintf("rollup-%d", i), nil, s.rollupBin, "--config", s.cfg["rollup"], "--http", "127.0.0.1:0")
	s.rollups[i] = p
	return err
}

// urls returns every agent's base URL; regionURLs those of region r.
func (s *regionSystem) urls() []string {
	var u []string
	for _, a := range s.agents {
		u = append(u, a.base())
	}
	return u
}

func (s *regionSystem) regionURLs(r string) []string {
	var u []string
	for _, a := range s.agents {
		if a.region == r {
			u = append(u, a.base())
		}
	}
	return u
}

func (s *regionSystem) rollupBases() []string {
	var u []string
	for _, p := range s.rollups {
		if p != nil {
			u = append(u, p.base)
		}
	}
	return u
}

// logs returns the streams' state and the tail of every process's
// stderr, for a failed row.
func (s *regionSystem) logs(n int) string {
	var out strings.Builder
	out.WriteString("--- streams\n" + s.b.state(strings.ToUpper(s.run)))
	out.WriteString("--- " + s.rollupCounts() + "\n")
	// EDGECOUNT_FAULTS_LOGS: a directory for every process's whole log.
	if dir := os.Getenv("EDGECOUNT_FAULTS_LOGS"); dir != "" {
		save := func(name string, p *proc) {
			if p == nil {
				return
			}
			f := filepath.Join(dir, s.run+"-"+name+".log")
			if err := os.WriteFile(f, []byte(p.stderr.String()), 0o644); err != nil {
				fmt.Fprintf(&out, "--- cannot save %s: %v\n", f, err)
			}
		}
		for _, a := range s.agents {
			save("agent-"+a.id, a.p)
		}
		for i, p := range s.rollups {
			save(fmt.Sprintf("rollup-%d", i), p)
		}
		fmt.Fprintf(&out, "--- whole logs in %s/%s-*.log\n", dir, s.run)
	}
	for _, a := range s.agents {
		if a.p != nil {
			fmt.Fprintf(&out, "--- edge-agent %s (tail)\n%s\n", a.id, tail(a.p.stderr.String(), n))
		}
	}
	for i, p := range s.rollups {
		if p != nil {
			fmt.Fprintf(&out, "--- rollup-%d (tail)\n%s\n", i, tail(p.stderr.String(), n))
		}
	}
	return out.String()
}

// waitReadyz waits until base/readyz answers 200 (degraded included).
func waitReadyz(t *testing.T, base string) {
	t.Helper()
	waitFor(t, 60*time.Second, base+"/readyz = 200", func() error { return httpOK(base + "/readyz") })
}

// The regional fault rows (faultsuite_test.go runs them in its frame).

// probeItem is the item a row's probes write, apart from the load's.
const probeItem = "probe"

// prober sends a row's probes: increments of probeItem that must be
// acknowledged and reads that must answer, through chosen agents.
type prober struct {
	t      *testing.T
	client *http.Client
	acked  int64 // probe increments acknowledged
	failed []string
}

func newProber(t *testing.T) *prober {
	return &prober{t: t, client: &http.Client{Timeout: 10 * time.Second}}
}

// write sends one probe increment through base and wants 202.
func (p *prober) write(base string) {
	got, err := send(p.client, base+"/v1/increments", map[string]any{"increments": []map[string]any{{"content_id": probeItem, "counter": "view", "delta": 1}}})
	if err != nil || got.status != http.StatusAccepted {
		p.failed = append(p.failed, fmt.Sprintf("POST %s/v1/increments = %d %s (%v)", base, got.status, tail(got.body, 200), err))
		return
	}
	p.acked++
}

// read GETs base's counts of the load's first items in scope (a region
// or global) and wants 200; it returns their views.
func (p *prober) read(base, scope string) int64 {
	u := base + "/v1/counts?region=" + scope + "&content_id=v000&content_id=v001&content_id=v002"
	var got struct {
		Counts []struct {
			Counters map[string]int64 `json:"counters"`
		} `json:"counts"`
	}
	if err := getJSON(p.client, u, &got); err != nil {
		p.failed = append(p.failed, fmt.Sprintf("GET %s: %v", u, err))
		return -1
	}
	var n int64
	for _, c := range got.Counts {
		n += c.Counters["view"]
	}
	return n
}

// during runs f every second for d.
func during(d time.Duration, f func()) {
	began := time.Now()
	for time.Since(began) < d {
		f()
		time.Sleep(time.Until(began.Add(time.Duration(int64(time.Since(began)/time.Second)+1) * time.Second)))
	}
}

// check fails the row for every failed probe and, once the totals have
// drained, wants probeItem's global count to equal the probes acked.
func (p *prober) check(r *rowRun, base string, what string) {
	for i, f := range p.failed {
		if i == 5 {
			p.t.Errorf("… %d more failed probes", len(p.failed)-5)
			break
		}
		p.t.Errorf("%s: %s", what, f)
	}
	if p.acked > 0 {
		r.note("%d probe writes acknowledged, %d probes failed (%s)", p.acked, len(p.failed), what)
	} else {
		r.note("%d probes failed (%s)", len(p.failed), what)
	}
	r.afterDrain = append(r.afterDrain, func() {
		c := counts{Counters: map[string]int64{}}
		if err := getJSON(p.client, base+"/v1/counts/"+probeItem+"?region=global", &c); err != nil {
			p.t.Errorf("GET the probe item's counts: %v", err)
			return
		}
		if c.Counters["view"] != p.acked {
			p.t.Errorf("the probe item counts %d views globally, want the %d acknowledged", c.Counters["view"], p.acked)
		}
	})
}

// streamLastSeq returns the last sequence of a stream on the server js
// talks to.
func streamLastSeq(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

func runRegionCut(t *testing.T, r *rowRun) {
	const region = "us-east"
	cut := r.pick(30*time.Second, 15*time.Second)
	r.describe("%s's leaf link to the hub cut for %v under load, then given back", region, cut)
	s := r.startRegions(regionOptions{})
	r.hold(r.pick(10*time.Second, 5*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The region's own server, as its agents see it.
	reg := jsClient(t, s.b.regionURL(region))
	stream := strings.ToUpper(s.run)

	s.b.links[region].cut()
	floorAtCut, err := ackFloor(ctx, reg, stream, natsjs.HubConsumer)
	if err != nil {
		t.Fatalf("the hub's source consumer on %s: %v", region, err)
	}
	p := newProber(t)
	during(cut, func() {
		for _, base := range s.regionURLs(region) {
			p.write(base)
			p.read(base, region)
		}
	})
	if n, err := s.b.leafLinks(region); err != nil || n != 0 {
		t.Errorf("%s's server has %d leaf links (%v) during the cut, want 0: the cut did not hold", region, n, err)
	}
	seq, err := streamLastSeq(ctx, reg, stream)
	if err != nil {
		t.Fatalf("%s's stream: %v", region, err)
	}
	if err := s.b.links[region].restore(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	p.check(r, s.regionURLs(region)[0], fmt.Sprintf("through %s's agents during the cut", region))
	// G16: the hub holds the region's backlog (every message the region
	// took up to the link's return) at some time between the origin's
	// source consumer delivering the last of it over the link (a lower
	// bound) and the hub acknowledging it all (an upper bound: the ack
	// floor moves with flow-control replies). In between, the hub's own
	// view: its source of the region has been active since the link
	// returned and shows no lag (during a cut the lag keeps its last
	// value, so a lag of 0 alone says nothing).
	hub := jsClient(t, s.b.hubURL())
	var linked, delivered, caughtUp, acked time.Duration
	for {
		since := time.Since(back)
		if linked == 0 {
			if n, err := s.b.leafLinks(region); err == nil && n > 0 {
				linked = since
			}
		}
		if caughtUp == 0 {
			if src, err := hubSource(ctx, hub, stream, region); err == nil && src.Active < since && src.Lag == 0 && delivered > 0 {
				caughtUp = since
			}
		}
		info, err := consumerInfo(ctx, reg, stream, natsjs.HubConsumer)
		if err == nil && delivered == 0 && info.Delivered.Stream >= seq {
			delivered = since
		}
		if err == nil && info.AckFloor.Stream >= seq && acked == 0 {
			acked = since
		}
		// Done once acknowledged and the source seen caught up (or 10 s
		// after the acknowledgement without that).
		if acked > 0 && (caughtUp > 0 || since > acked+10*time.Second) {
			since := acked
			caught := "not seen"
			if caughtUp > 0 {
				caught = fmt.Sprintf("%.1f s", caughtUp.Seconds())
			}
			r.note("G16: %s's %d-message backlog delivered to the hub %.1f s, the hub's source caught up (lag 0) %s, acknowledged by the hub %.1f s after the link returned (leaf link up after %.1f s; goal ≤ 5 s)",
				region, seq-floorAtCut, delivered.Seconds(), caught, since.Seconds(), linked.Seconds())
			t.Logf("G16: %s's backlog (%d messages, up to sequence %d): leaf link up %v, delivered %v, source caught up %v, acknowledged %v after the link returned",
				region, seq-floorAtCut, seq, linked.Round(10*time.Millisecond), delivered.Round(10*time.Millisecond), caughtUp.Round(10*time.Millisecond), since.Round(10*time.Millisecond))
			break
		}
		if acked == 0 && since > 2*time.Minute {
			t.Errorf("the hub has not acknowledged %s's backlog (up to sequence %d; %+v, %v) 2 min after the link returned", region, seq, info, err)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.hold(time.Until(back.Add(r.pick(10*time.Second, 5*time.Second))))
}

// hubSource returns the hub stream's source of region's stream.
func hubSource(ctx context.Context, js jetstream.JetStream, stream, region string) (*jetstream.StreamSourceInfo, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	for _, src := range info.Sources {
		if src.External != nil && src.External.APIPrefix == "$JS."+region+".API" {
			return src, nil
		}
	}
	return nil, fmt.Errorf("hub stream %s has no source in domain %s", stream, region)
}

// hubLeader returns the index of the hub server leading stream.
func hubLeader(ctx context.Context, t *testing.T, b *brokers, stream string) int {
	t.Helper()
	s, err := jsClient(t, b.hubURL()).Stream(ctx, stream)
	if err != nil {
		t.Fatalf("hub stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		t.Fatalf("hub stream %s info: %v", stream, err)
	}
	for i, h := range b.hub {
		if h.name == info.Cluster.Leader {
			return i
		}
	}
	t.Fatalf("hub stream %s is led by %q, none of the hub's servers", stream, info.Cluster.Leader)
	return 0
}

func runHubKill(t *testing.T, r *rowRun) {
	down := r.pick(20*time.Second, 10*time.Second)
	r.describe("SIGKILL the hub server leading the hub stream under load; restarted %v later", down)
	s := r.startRegions(regionOptions{})
	r.hold(r.pick(10*time.Second, 5*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	i := hubLeader(ctx, t, s.b, strings.ToUpper(s.run))
	s.b.killHub(i)
	r.hold(down)
	began := time.Now()
	s.b.hub[i].start()
	r.note("killed %s (the stream leader); healthy %.1f s after its restart", s.b.hub[i].name, time.Since(began).Seconds())
	r.hold(r.pick(10*time.Second, 5*time.Second))
	// Deliveries lost in transit with the killed server show as batches
	// held back until they came again (docs/delivery.md, "Gaps").
	var held float64
	for _, base := range s.rollupBases() {
		held += metric(t, base, "edgecount_rollup_batches_held_back_total")
	}
	r.note("the running rollups held %v batches back; %s", held, s.rollupCounts())
}

// caughtUpBacklog is the hub stream backlog of rollups that keep up: the
// messages of 10 s (each agent flushes every partition every 200 ms). A
// rollup in step holds a batch per partition unacknowledged and the next
// flushes wait behind it, so the backlog of a caught-up pipeline under load
// is never near zero (one run: 438 when the rollups' lag was 0.4–1.6 s).
var caughtUpBacklog = uint64(len(topologyRegions) * faultPartitions * int(10*time.Second/(200*time.Millisecond)))

func runDCStop(t *testing.T, r *rowRun) {
	down := r.pick(30*time.Second, 15*time.Second)
	r.describe("Cassandra dc2 stopped for %v, then dc1 for %v (the rollups' own), each started again", down, down)
	cluster := privateCluster(t, "127.0.0.41")
	s := r.startRegions(regionOptions{cluster: cluster})
	r.hold(r.pick(10*time.Second, 5*time.Second))

	// dc2 down: us-east (dc1) keeps reading, and the rollups keep
	// writing totals, which us-east sees grow.
	took := cluster.stopDC("dc2")
	east := s.regionURLs("us-east")[0]
	p := newProber(t)
	first := p.read(east, "global")
	during(down, func() { p.read(east, "global") })
	last := p.read(east, "global")
	if first < 0 || last <= first {
		t.Errorf("the totals read in us-east went from %d to %d while dc2 was down: the rollups in dc1 did not keep writing", first, last)
	}
	r.note("dc2 stopped (%.0f s to drain): totals read in us-east grew from %d to %d", took.Seconds(), first, last)
	took = cluster.startDC("dc2")
	r.note("dc2 back in %.0f s", took.Seconds())
	p.check(r, east, "reads in us-east while dc2 was down")
	r.hold(r.pick(10*time.Second, 5*time.Second))

	// dc1 down: eu-west and ap-south (dc2) keep reading; the rollups
	// cannot write and catch up once dc1 is back (the drain shows it).
	took = cluster.stopDC("dc1")
	q := newProber(t)
	during(down, func() {
		q.read(s.regionURLs("eu-west")[0], "global")
		q.read(s.regionURLs("ap-south")[0], "eu-west")
	})
	r.note("dc1 stopped (%.0f s to drain)", took.Seconds())
	took = cluster.startDC("dc1")
	r.note("dc1 back in %.0f s", took.Seconds())
	q.check(r, s.regionURLs("eu-west")[0], "reads in eu-west and ap-south while dc1 was down")
	r.hold(r.pick(10*time.Second, 5*time.Second))

	// A DC restart takes minutes on a loaded machine (259 s and 293 s in
	// one run for a 15 s stop), and the rollups' backlog of that outage and
	// the agents' reactions left open by it (a 503 each) take more: wait,
	// under load and bounded, until the rollups have consumed the hub
	// stream and the agents hold no more open reactions than the load has
	// in flight, so that the drain judges a system that caught up rather
	// than its backlog. Not caught up in time is noted with the backlog;
	// the drain's verdict then fails the row.
	caughtUp := time.Now()
	stream := strings.ToUpper(s.run)
	js := jsClient(t, s.b.hubURL())
	var state string
	caught := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			state = err.Error()
			return false
		}
		var backlog uint64
		for ci := range st.ListConsumers(ctx).Info() {
			backlog += ci.NumPending + uint64(ci.NumAckPending)
		}
		open := metricSum(s.urls(), "edgecount_agent_intents_pending")
		state = fmt.Sprintf("hub stream backlog %d messages, %v reactions open in the agents", backlog, open)
		return backlog <= caughtUpBacklog && open <= float64(defaultLoadConfig().users)
	}
	ok := false
	for deadline := time.Now().Add(r.pick(8*time.Minute, 5*time.Minute)); !ok && time.Now().Before(deadline); {
		if ok = caught(); !ok {
			time.Sleep(2 * time.Second)
		}
	}
	if ok {
		r.note("caught up %.0f s after dc1's return (%s)", time.Since(caughtUp).Seconds(), state)
	} else {
		r.note("not caught up %.0f s after dc1's return: %s", time.Since(caughtUp).Seconds(), state)
	}
	// How the reactions whose outcome the outages left open were decided,
	// and what the recount job did meanwhile: the evidence for a count
	// that differs from the rows.
	r.afterDrain = append(r.afterDrain, func() { r.note("%s", dcStopEvidence(s)) })
}

// dcStopEvidence sums the agents' intent counters and the rollups' recount
// counters.
func dcStopEvidence(s *regionSystem) string {
	agents, rollups := s.urls(), s.rollupBases()
	sum := metricSum
	return fmt.Sprintf("agents: intents settled by the row %v (applied %v, ambiguous %v), pending %v; recount: rows repaired %v (drift %v), deferred %v, unrepaired %v, verifies %v",
		sum(agents, "edgecount_agent_intents_settled_total"), sum(agents, "edgecount_agent_intents_applied_total"),
		sum(agents, "edgecount_agent_intents_ambiguous_total"), sum(agents, "edgecount_agent_intents_pending"),
		sum(rollups, "edgecount_recount_rows_repaired_total"), sum(rollups, "edgecount_recount_drift_repaired_total"),
		sum(rollups, "edgecount_recount_rows_deferred_total"), sum(rollups, "edgecount_recount_rows_unrepaired_total"),
		sum(rollups, "edgecount_recount_verifies_total"))
}

// metricSum sums a metric over processes' metrics pages; a page that
// cannot be read or lacks the metric gives NaN (evidence for a row's note
// must not fail a judged row).
func metricSum(bases []string, name string) float64 {
	var v float64
	for _, b := range bases {
		status, body := 0, ""
		if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(b + "/metrics"); err == nil {
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			status, body = resp.StatusCode, string(data)
		}
		found := false
		for line := range strings.Lines(body) {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), name)
			if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			f := strings.Fields(rest)
			if x, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				v += x
				found = true
			}
		}
		if status != http.StatusOK || !found {
			return math.NaN()
		}
	}
	return v
}

// stored is how many messages a stream has stored since it was created.
func stored(info *jetstream.StreamInfo) uint64 {
	first := max(info.Config.FirstSeq, 1)
	if info.State.LastSeq < first {
		return 0
	}
	return info.State.LastSeq - first + 1
}

// rollupCounts sums the running rollups' message counters.
func (s *regionSystem) rollupCounts() string {
	var msgs, dups, order float64
	for _, base := range s.rollupBases() {
		msgs += metric(s.t, base, "edgecount_rollup_messages_total")
		dups += metric(s.t, base, "edgecount_rollup_duplicates_dropped_total")
		order += metric(s.t, base, "edgecount_rollup_order_violations_total")
	}
	return fmt.Sprintf("the running rollups applied %v messages, dropped %v as duplicates, saw %v order violations", msgs, dups, order)
}

// state describes the streams of the topology for a failed row: each
// region's stream and the hub's source consumer on it, and the hub stream
// with its sources and consumers.
func (b *brokers) state(stream string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out strings.Builder
	look := func(url string, f func(js jetstream.JetStream)) {
		nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
		if err != nil {
			fmt.Fprintf(&out, "  cannot connect to %s: %v\n", url, err)
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			fmt.Fprintf(&out, "  %v\n", err)
			return
		}
		f(js)
	}
	consumers := func(js jetstream.JetStream, s jetstream.Stream) {
		for ci := range s.ListConsumers(ctx).Info() {
			fmt.Fprintf(&out, "    consumer %s: delivered stream seq %d, ack floor %d, pending %d, ack pending %d, redelivered %d\n",
				ci.Name, ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
		}
	}
	for r, srv := range b.regions {
		look("nats://"+srv.addr, func(js jetstream.JetStream) {
			s, err := js.Stream(ctx, stream)
			if err != nil {
				fmt.Fprintf(&out, "  %s stream %s: %v\n", r, stream, err)
				return
			}
			info, err := s.Info(ctx)
			if err != nil {
				fmt.Fprintf(&out, "  %s stream %s: %v\n", r, stream, err)
				return
			}
			fmt.Fprintf(&out, "  %s stream %s: %d msgs, seq %d..%d, %d stored since its creation\n", r, stream, info.State.Msgs, info.State.FirstSeq, info.State.LastSeq, stored(info))
			consumers(js, s)
		})
	}
	look(b.hubURL(), func(js jetstream.JetStream) {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			fmt.Fprintf(&out, "  hub stream %s: %v\n", stream, err)
			return
		}
		info, err := s.Info(ctx)
		if err != nil {
			fmt.Fprintf(&out, "  hub stream %s: %v\n", stream, err)
			return
		}
		leader := ""
		if info.Cluster != nil {
			leader = info.Cluster.Leader
		}
		fmt.Fprintf(&out, "  hub stream %s: %d msgs, seq %d..%d, %d stored since its creation, leader %s\n", stream, info.State.Msgs, info.State.FirstSeq, info.State.LastSeq, stored(info), leader)
		for _, src := range info.Sources {
			fmt.Fprintf(&out, "    source %s (%v): lag %d, active %v, error %v\n", src.Name, src.External, src.Lag, src.Active, src.Error)
		}
		consumers(js, s)
	})
	return out.String()
}

// getJSON decodes the 200 answer of a GET of u into v (the brokers'
// monitoring endpoints and the agents' reads the regional rows check).
func getJSON(client *http.Client, u string, v any) error {
	resp, err := client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s = %d", u, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
