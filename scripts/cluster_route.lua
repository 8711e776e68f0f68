-- Prefix-affinity routing for the HAProxy config that scripts/cluster.sh writes (lua-load).
--
-- specula_replica: the replica for this request, by rendezvous hashing of its routing key
-- (txn.prefix: the start of its prompt) over the replicas that are UP; a saturated replica, one
-- with more requests in flight than slots (its weight, which cluster.sh sets to the replica's
-- slot count from /props), passes the request on to the next one in the key's order, so a key
-- always falls back to the same second choice. One request over the slots is let through: it
-- waits for a slot where its prefix is cached (and a session HAProxy is still closing counts
-- for a moment). When every replica is saturated: the first (it queues there).
-- "" when none is UP (the backend's own balancing then answers).

-- FNV-1a, then murmur3's finalizer (keys that differ in a digit still spread evenly).
local function hash(s)
    local h = 2166136261
    for i = 1, #s do
        h = ((h ~ s:byte(i)) * 16777619) & 0xffffffff
    end
    h = h ~ (h >> 16)
    h = (h * 0x85ebca6b) & 0xffffffff
    h = h ~ (h >> 13)
    h = (h * 0xc2b2ae35) & 0xffffffff
    return h ~ (h >> 16)
end

core.register_fetches("specula_replica", function(txn)
    local key = txn:get_var("txn.prefix") or ""
    local backend = core.backends["replicas"]
    if backend == nil then return "" end
    local ranked = {}
    for name, server in pairs(backend.servers) do
        local st = server:get_stats()
        local status = st.status or ""
        if status == "UP" or status:sub(1, 3) == "UP " then
            ranked[#ranked + 1] = {
                name = name,
                score = hash(name .. "\0" .. key),
                busy = tonumber(st.scur) or 0,
                slots = tonumber(st.weight) or 1,
            }
        end
    end
    if #ranked == 0 then return "" end
    table.sort(ranked, function(a, b)
        if a.score ~= b.score then return a.score > b.score end
        return a.name < b.name
    end)
    for _, r in ipairs(ranked) do
        if r.busy <= r.slots then return r.name end
    end
    return ranked[1].name
end)
