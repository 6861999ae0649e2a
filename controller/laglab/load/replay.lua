-- laglab's replay of a write profile (laglab/load/replay.py writes the plan this reads; docs/scenarios.md).
-- Run by sysbench 1.0 in loadgen: `sysbench replay.lua --plan=FILE --threads=N --time=S run`.
--
-- Each second of the profile keeps its count of transactions: its large ones (their own sizes, at
-- their moment in the second), then the others spread evenly over the second, their sizes drawn from the profile's quantiles of
-- transaction bytes. Transaction k of the whole sequence belongs to thread k mod N (N: the parallelism
-- the profile recorded), which waits for its moment, then writes it as rows of the table drawn by the
-- profile's rows, sized so that the binlog gets the transaction's bytes (`overhead` and `rowcost`, the
-- bytes a transaction and a row cost in this server's binlog, were measured by the controller just
-- before). The profile repeats until --time ends; `speed` scales its clock.
--
-- The event loop is sysbench's own (src/lua/internal/sysbench.lua, thread_run: sb_more_events,
-- sb_event_start, sb_event_stop), with the wait for the moment before sb_event_start so that the
-- reported latency is the transaction's own.

ffi = require("ffi")
pcall(ffi.cdef, "typedef struct { long tv_sec; long tv_usec; } laglab_timeval;")
pcall(ffi.cdef, "int gettimeofday(laglab_timeval *tv, void *tz);")
pcall(ffi.cdef, "int usleep(unsigned int usec);")

sysbench.cmdline.options = {
   plan = {"The replay plan laglab wrote", ""},
}

local STATEMENT_BYTES = 1048576 -- rows are sent in INSERTs of about this many bytes
local MAX_PAD = 8388608

local function now()
   local tv = ffi.new("laglab_timeval")
   ffi.C.gettimeofday(tv, nil)
   return tonumber(tv.tv_sec) + tonumber(tv.tv_usec) / 1e6
end

local function read_plan(path)
   local plan = {seconds = {}, tables = {}, quantiles = {}, weight = 0}
   local file = assert(io.open(path, "r"), "cannot open the replay plan " .. path)
   for line in file:lines() do
      local words = {}
      for word in line:gmatch("%S+") do words[#words + 1] = word end
      local key = words[1]
      if key == "second" then
         local second = {t = tonumber(words[2]), small = tonumber(words[3]), large = {}}
         for i = 4, #words do
            local bytes, rows, offset = words[i]:match("^(%d+):(%d+):([%d.]+)$")
            second.large[#second.large + 1] = {bytes = tonumber(bytes), rows = tonumber(rows), offset = tonumber(offset)}
         end
         second.total = second.small + #second.large
         plan.seconds[#plan.seconds + 1] = second
      elseif key == "table" then
         plan.weight = plan.weight + tonumber(words[3])
         plan.tables[#plan.tables + 1] = {name = words[2], upto = plan.weight, row_bytes = tonumber(words[4])}
      elseif key == "quantiles" then
         for i = 2, #words do plan.quantiles[#plan.quantiles + 1] = tonumber(words[i]) end
      elseif key ~= nil and key:sub(1, 1) ~= "#" then
         plan[key] = tonumber(words[2])
      end
   end
   file:close()
   assert(plan.span and plan.speed and plan.overhead and plan.rowcost, "the replay plan misses a figure")
   assert(#plan.tables > 0 and #plan.quantiles == 101, "the replay plan has no tables or no quantiles")
   return plan
end

local function draw_bytes(plan)
   local u = sysbench.rand.uniform_double() * 100
   local i = math.floor(u)
   local low, high = plan.quantiles[i + 1], plan.quantiles[math.min(i + 2, 101)]
   return math.floor(low + (high - low) * (u - i) + 0.5)
end

local function draw_table(plan)
   local u = sysbench.rand.uniform_double() * plan.weight
   for _, t in ipairs(plan.tables) do
      if u < t.upto then return t end
   end
   return plan.tables[#plan.tables]
end

function thread_init()
   plan = read_plan(sysbench.opt.plan)
   drv = sysbench.sql.driver()
   con = drv:connect()
   started = now()
   ends = started + (sysbench.opt.time > 0 and sysbench.opt.time or 1e12)
   cursor = {index = 1, k = 0, lap = 0, global = 0}
end

function thread_done()
   con:disconnect()
end

-- The next transaction of this thread: its moment (epoch), bytes and rows (nil: the profile's row width).
local function next_transaction(thread_id)
   local threads = sysbench.opt.threads
   while true do
      local second = plan.seconds[cursor.index]
      if second == nil then
         if #plan.seconds == 0 then return nil end
         cursor.index, cursor.k, cursor.lap = 1, 0, cursor.lap + 1
      elseif cursor.k >= second.total then
         cursor.index, cursor.k = cursor.index + 1, 0
      else
         local k = cursor.k
         local mine = cursor.global % threads == thread_id
         cursor.k, cursor.global = k + 1, cursor.global + 1
         if mine then
            local at, bytes, rows = second.t, nil, nil
            if k < #second.large then
               local big = second.large[k + 1]
               bytes, rows, at = big.bytes, big.rows, at + big.offset
            else
               at = at + (k - #second.large + 0.5) / second.small
               bytes = draw_bytes(plan)
            end
            return started + (cursor.lap * plan.span + at) / plan.speed, bytes, rows
         end
      end
   end
end

local function write(bytes, rows)
   local t = draw_table(plan)
   local payload = math.max(0, bytes - plan.overhead)
   if rows == nil or rows < 1 then
      rows = math.max(1, math.floor(payload / math.max(t.row_bytes, plan.rowcost + 1) + 0.5))
   end
   local pad = math.min(MAX_PAD, math.max(0, math.floor(payload / rows - plan.rowcost + 0.5)))
   local per_statement = math.max(1, math.floor(STATEMENT_BYTES / (pad + 8)))
   con:query("BEGIN")
   local left = rows
   while left > 0 do
      local n = math.min(left, per_statement)
      local values = {}
      for i = 1, n do
         values[i] = "('" .. sysbench.rand.string(string.rep("@", pad)) .. "')"
      end
      con:query("INSERT INTO " .. t.name .. " (pad) VALUES " .. table.concat(values, ","))
      left = left - n
   end
   con:query("COMMIT")
end

function thread_run(thread_id)
   while ffi.C.sb_more_events(thread_id) do
      local at, bytes, rows = next_transaction(thread_id)
      if at == nil then break end
      local wait = math.min(at, ends) - now()
      while wait > 0 do
         ffi.C.usleep(math.floor(math.min(wait, 0.5) * 1e6))
         wait = math.min(at, ends) - now()
      end
      if now() >= ends then break end
      ffi.C.sb_event_start(thread_id)
      write(bytes, rows)
      ffi.C.sb_event_stop(thread_id)
   end
end

function event()
   -- not called: thread_run above is the loop
end
