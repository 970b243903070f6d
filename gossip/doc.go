// Package gossip is the membership of a region's edge agents: one
// hashicorp/memberlist cluster per region, carrying each agent's metadata
// and the small values the agents share (their Top-K summaries, opaque
// here), and exposing the region's view as data (Cluster, Members) for the
// agent's HTTP API to serve. It is the only package that imports memberlist.
//
// Invariants:
//   - Regions never merge: traffic carries the label "edgecount/<region>"
//     and a node refuses members whose metadata names another region.
//   - Traffic that no installed key decrypts is dropped; ReloadKeys makes
//     the keyring match the key file, and a bad file changes nothing.
//   - A peer keeps, per (node, key), the value with the highest version, and
//     accepts values only from live members.
//   - Every message is bounded and validated before use; one that fails is
//     dropped whole and counted. No input panics (the decoders are fuzzed).
//
// All methods of Node are safe for concurrent use. Node starts the
// large-value sender, the rejoin loop, the query server and one goroutine
// per query send (query.go: a question to every live member, answered over
// TCP), and Close waits for all before shutting memberlist down;
// memberlist's own goroutines end shortly after. Leave before Close so peers see "left" rather than "dead".
// Lock order: memberlist's locks, then the log writer's, then Node.mu; Node
// never calls into memberlist with Node.mu held. Design note: docs/gossip.md
// (membership, key rotation, rejected traffic, shared values).
package gossip
