// Server-side figures from /proc: CPU time (user + system, all threads) and resident memory of
// one process. CPU comes in clock ticks (CLK_TCK, 100 on Linux), so a scenario needs enough
// operations for its per-op figure to be meaningful; every scenario runs for seconds.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

let clkTck = 100
try {
  clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
} catch {
  // getconf missing: Linux's USER_HZ is 100 everywhere we run
}

/**
 * CPU milliseconds (user + system) the process has used so far; with `mainThread`, only its first
 * thread's (for Node, the one JavaScript runs on: when it is busy all the time, the process can
 * go no faster however idle the other cores are).
 */
export function cpuMs(pid, { mainThread = false } = {}) {
  const stat = readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8')
  // the command name (field 2) is in parentheses and may contain spaces: split after it
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const utime = Number(fields[11]) // field 14 overall
  const stime = Number(fields[12]) // field 15 overall
  return ((utime + stime) * 1000) / clkTck
}

/** Resident set now and its peak (VmHWM), in MiB. */
export function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN)
  return { rssMiB: kb('VmRSS') / 1024, peakMiB: kb('VmHWM') / 1024 }
}

/**
 * The machine's CPU so far, from the first line of /proc/stat: `busy` and `total` in clock ticks
 * summed over every core (idle and iowait count as not busy; steal, time the hypervisor gave to
 * others, as busy). A difference of two readings gives the share of all cores kept busy.
 */
export function machineCpu() {
  const [, ...ticks] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).map(Number)
  const total = ticks.slice(0, 8).reduce((a, b) => a + b, 0)
  const idle = ticks[3] + ticks[4]
  return { busy: total - idle, total }
}
