package gossip

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/edgecount/edgecount/engagement"
)

// Profile names a set of memberlist timings.
type Profile string

// Timing profiles.
const (
	// ProfileLAN is memberlist.DefaultLANConfig: a region's agents on one
	// network (failure detected in about 5 s, push/pull every 30 s).
	ProfileLAN Profile = "lan"
	// ProfileWAN is memberlist.DefaultWANConfig, for agents of one region
	// spread over a slow network.
	ProfileWAN Profile = "wan"
	// ProfileLocal is memberlist.DefaultLocalConfig, for agents on one
	// machine.
	ProfileLocal Profile = "local"
	// ProfileFast is for tests on loopback: failures detected in about a
	// second, push/pull every second.
	ProfileFast Profile = "fast"
)

// LabelPrefix starts every region's memberlist label: the label of region R
// is LabelPrefix+R. memberlist drops packets and streams that carry another
// label, so agents of two regions never merge even when one is pointed at
// the other's seeds.
const LabelPrefix = "edgecount/"

// Config configures a Node.
type Config struct {
	// Region is the region whose cluster the node joins (engagement.ValidRegion).
	Region string
	// AgentID identifies the agent (engagement.ValidID).
	AgentID string
	// NodeName is the memberlist node name, unique in the region; default
	// AgentID. Same rule as ids.
	NodeName string
	// HTTPAddr is the agent's API address, told to peers (may be empty).
	HTTPAddr string
	// Version is the agent's build version, told to peers (may be empty).
	Version string

	// BindAddr and BindPort are where gossip listens (UDP and TCP). Port 0
	// picks a free port (Node.Addr tells which).
	BindAddr string
	BindPort int
	// AdvertiseAddr and AdvertisePort are what peers dial; empty and 0
	// mean the bound address (or, when bound to all interfaces, the first
	// private address) and the bound port.
	AdvertiseAddr string
	AdvertisePort int

	// Seeds are host:port addresses of the region's nodes, tried by Join
	// and, while the node is alone, every RejoinInterval.
	Seeds []string
	// RejoinInterval is how often a node that has no peer joins Seeds
	// again; 0 never.
	RejoinInterval time.Duration

	// KeyFile holds the gossip keys (LoadKeyFile). Empty sends gossip in
	// plain text, which Validate refuses unless AllowPlaintext is set.
	KeyFile        string
	AllowPlaintext bool

	// Profile picks memberlist's timings.
	Profile Profile

	// MaxValueBytes bounds one published value, both sent and received.
	// Every node of a region should have the same. At most MaxValueLimit.
	MaxValueBytes int
	// MaxKeys bounds the keys one node may publish; updates for further
	// keys are refused (Stats.UpdatesRefused).
	MaxKeys int
	// ForgetAfter is how long a dead or left member stays in Members.
	ForgetAfter time.Duration
	// LogThrottle is the least time between two logged lines of one kind
	// of rejected traffic (every line is counted).
	LogThrottle time.Duration

	// OnEvent, if set, is told of every membership change seen by this
	// node, one at a time and in order, from memberlist's goroutines. It
	// must not block (it delays failure detection) and must not call
	// Join, Leave, Close or ReloadKeys (memberlist holds its node lock);
	// it may call the other methods.
	OnEvent func(Event)

	// label overrides LabelPrefix+Region (tests only).
	label string
}

// DefaultConfig returns the defaults for an agent of region.
func DefaultConfig(region, agentID string) Config {
	return Config{
		Region:         region,
		AgentID:        agentID,
		BindAddr:       "0.0.0.0",
		BindPort:       7946,
		RejoinInterval: 30 * time.Second,
		Profile:        ProfileLAN,
		MaxValueBytes:  64 << 10,
		MaxKeys:        32,
		ForgetAfter:    10 * time.Minute,
		LogThrottle:    10 * time.Second,
	}
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	// What the node tells its peers must pass the checks they make.
	errs := Meta{Region: c.Region, AgentID: c.AgentID, HTTPAddr: c.HTTPAddr, Version: c.Version}.identityErrors()
	if c.NodeName != "" && !engagement.ValidID(c.NodeName) {
		errs = append(errs, fmt.Errorf("node name %q is not a valid id", c.NodeName))
	}
	if net.ParseIP(c.BindAddr) == nil {
		errs = append(errs, fmt.Errorf("bind addr %q is not an IP address", c.BindAddr))
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		errs = append(errs, fmt.Errorf("advertise addr %q is not an IP address", c.AdvertiseAddr))
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"bind port", c.BindPort}, {"advertise port", c.AdvertisePort}} {
		if p.v < 0 || p.v > 65535 {
			errs = append(errs, fmt.Errorf("%s %d is outside 0..65535", p.name, p.v))
		}
	}
	for i, s := range c.Seeds {
		if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("seeds[%d] %q is not host:port", i, s))
		}
	}
	if c.RejoinInterval < 0 {
		errs = append(errs, fmt.Errorf("rejoin interval %v is negative", c.RejoinInterval))
	}
	if c.KeyFile == "" && !c.AllowPlaintext {
		errs = append(errs, errors.New("key file is empty: gossip would be plain text (set allow plaintext to accept that)"))
	}
	switch c.Profile {
	case ProfileLAN, ProfileWAN, ProfileLocal, ProfileFast:
	default:
		errs = append(errs, fmt.Errorf("profile %q is not lan, wan, local or fast", c.Profile))
	}
	if c.MaxValueBytes < 1 || c.MaxValueBytes > MaxValueLimit {
		errs = append(errs, fmt.Errorf("max value bytes %d is outside 1..%d", c.MaxValueBytes, MaxValueLimit))
	}
	if c.MaxKeys < 1 || c.MaxKeys > 4096 {
		errs = append(errs, fmt.Errorf("max keys %d is outside 1..4096", c.MaxKeys))
	}
	if c.ForgetAfter <= 0 {
		errs = append(errs, fmt.Errorf("forget after %v is not positive", c.ForgetAfter))
	}
	if c.LogThrottle < 0 {
		errs = append(errs, fmt.Errorf("log throttle %v is negative", c.LogThrottle))
	}
	return errors.Join(errs...)
}

func (c Config) nodeName() string {
	if c.NodeName != "" {
		return c.NodeName
	}
	return c.AgentID
}

func (c Config) labelName() string {
	if c.label != "" {
		return c.label
	}
	return LabelPrefix + c.Region
}

// memberlistConfig returns memberlist's configuration for c's profile; the
// caller adds the delegates, logger and keyring.
func (c Config) memberlistConfig() *memberlist.Config {
	var mc *memberlist.Config
	switch c.Profile {
	case ProfileWAN:
		mc = memberlist.DefaultWANConfig()
	case ProfileLocal:
		mc = memberlist.DefaultLocalConfig()
	case ProfileFast:
		mc = memberlist.DefaultLocalConfig()
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.GossipInterval = 20 * time.Millisecond
		mc.PushPullInterval = time.Second
		mc.SuspicionMult = 3
		mc.TCPTimeout = time.Second
		mc.GossipToTheDeadTime = 2 * time.Second
	default:
		mc = memberlist.DefaultLANConfig()
	}
	mc.Name = c.nodeName()
	mc.Label = c.labelName()
	mc.BindAddr = c.BindAddr
	mc.BindPort = c.BindPort
	mc.AdvertiseAddr = c.AdvertiseAddr
	mc.AdvertisePort = c.AdvertisePort
	if c.AdvertisePort == 0 {
		mc.AdvertisePort = c.BindPort
	}
	mc.RequireNodeNames = false
	return mc
}
