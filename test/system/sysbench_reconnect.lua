#!/usr/bin/sysbench
-- SPDX-License-Identifier: Apache-2.0
-- sysbench oltp_read_write that survives a lost connection and counts
-- the errors it met (test_failover_invisible.py). sysbench 1.0.20's own
-- reconnect (an error listed in --mysql-ignore-errors that lost the
-- connection) reuses the closed MYSQL handle and crashes with
-- libmariadb (akopytov/sysbench#527), so errors other than the server's
-- deadlocks and lock wait timeouts are caught here: the transaction is
-- abandoned, a new connection is opened (a new handle; the statements
-- prepared again) and the next transaction starts. At the end each
-- thread prints one line: "reconnect-errors: ERRNO=COUNT ...".

package.path = "/usr/share/sysbench/?.lua;" .. package.path
require("oltp_read_write")

local run_event = event
local seen = {}

function event(...)
   local ok, err = pcall(run_event, ...)
   if ok then
      return
   end
   -- a fatal SQL error comes as a string: "...SQL error, errno = N, ..."
   local code = tonumber(string.match(tostring(err), "SQL error, errno = (%d+)"))
   if code == nil then
      error(err, 0)   -- not an SQL error: a bug, let it stop the run
   end
   seen[code] = (seen[code] or 0) + 1
   if code == 1213 or code == 1205 then
      pcall(function() con:query("ROLLBACK") end)
      return
   end
   thread_init()   -- a new driver handle, connection and statements
end

local finish = thread_done

function thread_done()
   local parts = {}
   for code, n in pairs(seen) do
      parts[#parts + 1] = string.format("%d=%d", code, n)
   end
   table.sort(parts)
   io.stdout:write("reconnect-errors: " .. table.concat(parts, " ") .. "\n")
   pcall(finish)
end
