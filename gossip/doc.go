// Package gossip is the membership of a region's edge agents: one
// hashicorp/memberlist cluster per region, carrying each agent's metadata
// and the small values the agents share (their Top-K summaries, opaque
// here). It is the only package that imports memberlist.
//
// # Membership
//
// New starts a Node listening on Config.BindAddr:BindPort (port 0 picks a
// free port; Addr tells which). Join contacts seeds; while a node with
// seeds has no peer it joins them again every Config.RejoinInterval, so a
// region whose agents all start at once still forms one cluster. Every
// node carries its Meta (region, agent id, HTTP address, build version,
// fingerprints of its gossip keys) in memberlist's node metadata, in a
// compact versioned binary form of at most 422 bytes (memberlist's limit
// is 512), validated on decode. Members lists the members with their
// metadata and state (alive, suspect, dead, left); Config.OnEvent is told
// of every change, and every change is logged. memberlist reports a leave
// and a failure alike to its delegates, so Leave first sends every live
// member a leave notice over TCP; a member that got it records "left",
// one that did not (or a crash) records "dead".
//
// # Regions never merge
//
// Every packet and stream carries memberlist's label "edgecount/<region>"
// (authenticated by the encryption when there is a key), and memberlist
// drops traffic with any other label, so an agent pointed at another
// region's seeds cannot join it. Behind the label, a node refuses alive
// messages and joins of nodes whose metadata is invalid or names another
// region (Stats.RefusedNodes).
//
// # Encryption and key rotation
//
// Config.KeyFile holds the keys (LoadKeyFile): one standard-base64 key of
// 16, 24 or 32 bytes per line (`openssl rand -base64 32`), '#' comments and
// blank lines ignored, at most 8 keys. The first key is primary: it
// encrypts everything the node sends. Every listed key decrypts. Packets
// and streams that no installed key decrypts, or that are not encrypted,
// are dropped by memberlist. ReloadKeys (wire it to SIGHUP) re-reads the
// file and makes the keyring match it; a bad file changes nothing.
//
// Rotating a region's key without a partition, one step at a time, each
// step on every node before the next starts:
//
//  1. Append the new key as the last line of every node's key file and
//     reload (SIGHUP). Nodes now decrypt with both keys and still encrypt
//     with the old one.
//  2. When every member shows the new key's fingerprint among its
//     key_fingerprints in GET /v1/cluster, move the new key to the first
//     line and reload every node. Nodes now encrypt with the new key; a
//     node not yet switched still decrypts it, and its old-key traffic is
//     still decrypted by the switched ones.
//  3. When every member lists the new key first, delete the old key's line
//     and reload every node.
//
// Skipping the wait of step 2 partitions the region until the laggards
// reload. Fingerprint gives a key's fingerprint.
//
// # Rejected traffic is counted
//
// memberlist reports rejected traffic only in its log. The node routes
// memberlist's log through a writer that counts lines by kind (another
// label: Stats.LabelRejected; undecryptable or unencrypted:
// Stats.KeyRejected; unparsable: Stats.MalformedPackets) and logs them
// through slog, at most once per Config.LogThrottle per kind (with the
// number suppressed). The patterns are memberlist v0.7.0's messages; the
// tests provoke each with real traffic, so an upgrade that changes them
// fails the tests. The same writer sees memberlist's "Suspect <node> has
// failed" line, the only report of a failed probe: memberlist does not
// expose suspicion without a data race, so StateSuspect is this node's own
// view.
//
// # Shared values
//
// Publish(key, data) makes data this node's latest value under key. Each
// publish gets a version from a per-node clock that is at least the wall
// clock in nanoseconds and grows by one per publish, so a restarted node's
// values supersede its previous incarnation's. Peers keep, per (node, key),
// the value with the highest version: a stale or duplicate update never
// overwrites a newer one. Values travel three ways: as UDP broadcasts
// through memberlist's TransmitLimitedQueue when they fit one packet
// (about 1.3 KB; a node that applies a newer broadcast queues it again, so
// it spreads epidemically), otherwise over TCP to each live member from
// one background sender (latest value per key only); and in every
// push/pull (LocalState/MergeRemoteState: all values a node holds, its own
// first, at most 8 MiB), so a joining node gets everyone's values at once
// and a missed send is repaired at the next push/pull. Values are accepted
// only from live members; a member's values are dropped when it fails or
// leaves, and an update arriving later for it is refused.
//
// Every message is bounded and validated before use (wire.go: version,
// counts, name and key rules, values of at most Config.MaxValueBytes, at
// most Config.MaxKeys keys per node, no trailing bytes); one that fails is
// dropped whole and counted (Stats.StateMalformed, Stats.StateOversized).
// No input panics: the metadata and message decoders are fuzzed
// (FuzzDecodeMeta, FuzzDecodeEntries). memberlist v0.7.0 itself bounds
// user messages, push/pull state and decompression (its 2026 fixes).
//
// # Thread-safety and lifecycle
//
// All methods of Node are safe for concurrent use. Node starts two
// goroutines (the large-value sender and the rejoin loop) and Close waits
// for both before shutting memberlist down; memberlist's own goroutines end
// shortly after. Leave before Close so peers see "left" rather than "dead".
// Lock order: memberlist's locks, then the log writer's, then Node.mu;
// Node never calls into memberlist with Node.mu held.
package gossip
