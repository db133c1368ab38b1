"""An over-the-wire load generator for group coordinators (KIP-848 and classic).

Modules:
    wire             request frames built once with kio, correlation ids patched in place
    consumer_member  a simulated KIP-848 consumer (sans IO): join, heartbeat, revoke, acknowledge
    client           asyncio connections with pipelined requests; MemberDriver runs many members
    classic          classic JoinGroup/SyncGroup group formation, Heartbeat v4 frames
    blast            raw-socket worker processes: pipelined and one-request-in-flight patterns
    procs            Tansu and `kcoord serve` child processes, ports, /proc CPU time and RSS
    groups           form KIP-848 groups over the wire and wait until they are STABLE
"""
