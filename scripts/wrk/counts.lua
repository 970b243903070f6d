-- wrk script for count reads, used by scripts/bench.sh beside tools/loadgen
-- (a C client with one event loop, like redis-benchmark):
--   IDS=1   GET /v1/counts/item-K
--   IDS=16  GET /v1/counts?content_id=item-K&… with 16 ids
--   IDS=16 BODY=protobuf  POST /v1/counts, the 16 ids in a protobuf
--          CountsRequest (proto/edgecount/v1/edgecount.proto), answered in protobuf
-- each K uniform over 0..ITEMS-1 (default 10^4, loadgen's -items), from
-- 4096 requests drawn once.
local ids = tonumber(os.getenv("IDS") or "1")
local items = tonumber(os.getenv("ITEMS") or "10000")
local protobuf = os.getenv("BODY") == "protobuf"
local paths, bodies = {}, {}
math.randomseed(ids)
for i = 1, 4096 do
  if protobuf then
    local b = {}
    for j = 1, ids do
      local id = "item-" .. math.random(0, items - 1)
      -- field 1 (content_ids), wire type 2: tag 0x0a, length, bytes
      b[j] = string.char(0x0a, #id) .. id
    end
    bodies[i] = table.concat(b)
  elseif ids == 1 then
    paths[i] = "/v1/counts/item-" .. math.random(0, items - 1)
  else
    local q = {}
    for j = 1, ids do
      q[j] = "content_id=item-" .. math.random(0, items - 1)
    end
    paths[i] = "/v1/counts?" .. table.concat(q, "&")
  end
end
local n = 0
local pbHeaders = {["Content-Type"] = "application/x-protobuf"}
-- wrk.format at run time: wrk.headers holds Host only then.
request = function()
  n = n + 1
  local i = (n % 4096) + 1
  if protobuf then
    return wrk.format("POST", "/v1/counts", pbHeaders, bodies[i])
  end
  return wrk.format("GET", paths[i])
end
