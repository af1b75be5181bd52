// Process-level memory tuning for the server command (bin.ts; servers embedded in tests never get
// it). V8 reads its heap settings only when a process starts, so the
// server re-executes itself once, in place: process.execve keeps the pid, stdio and signal
// targets, so systemd, Docker and shells see one process throughout.
import { createRequire } from 'node:module'
import { RUNTIME_TUNED_VAR, type RuntimeEnv } from './config.js'
import { RECLAIM } from './limits.js'

/**
 * - a young generation of at most 2 x 4 MiB semi-spaces: by default V8 lets it grow past 100 MiB
 *   under load, and keeps it;
 * - no full collection before the old generation reaches 128 MiB (the live heap is ~30 MiB at
 *   start, more with warm caches): otherwise the ArrayBuffers of uploads and socket reads set one
 *   off every few requests (40 per 400 uploads of 1 MiB, each marking the whole heap; with it 1-3,
 *   and uploadBlob's CPU per call falls from ~8.5 to ~4.5 ms). 64 MiB was not enough once a long
 *   run had warmed the caches. What those collections would have freed earlier goes at the next
 *   one or when the server goes quiet;
 * - `gc` for reclaimWhenIdle below.
 */
export const V8_FLAGS = ['--max-semi-space-size=4', '--initial-old-space-size=128', '--expose-gc']

/**
 * Re-executes this process with the tuning unless it already has it, the operator turned it off
 * (PDS_RUNTIME_TUNING=false) or the platform cannot (no execve). Returns only when it did not
 * re-execute. Flags the operator already gives (command line or NODE_OPTIONS) are left to them.
 */
export function tuneRuntime(rt: RuntimeEnv): void {
  if (rt.tuned || !rt.enabled || typeof process.execve !== 'function') return
  const given = [...process.execArgv, ...rt.nodeOptions.split(/\s+/)].map(flagName)
  const flags = V8_FLAGS.filter((f) => !given.includes(flagName(f)))
  // glibc malloc settings (MALLOC_ARENA_MAX, GLIBC_TUNABLES) are left to the operator: fewer
  // arenas or per-hash mappings of scrypt's 16 MiB made each login cost 25-50% more CPU
  const env = { ...rt.env, [RUNTIME_TUNED_VAR]: '1' }
  try {
    process.execve(process.execPath, [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)], env)
  } catch (err) {
    // e.g. the node binary was replaced on disk since start: serve untuned rather than not at all
    process.stderr.write(`runtime tuning not applied: ${(err as Error).message}\n`)
  }
}

// --max_semi_space_size and --max-semi-space-size are one flag to V8
const flagName = (arg: string) => arg.split('=')[0].replace(/_/g, '-')

/**
 * glibc's malloc_trim(0) through native/malloc_trim.c (built by `make build`). glibc keeps what
 * the process freed inside its arenas, one per thread that allocated: after a burst of logins each
 * threadpool thread holds scrypt's 16 MiB, which a trim returns (~57 MiB here after 100 logins).
 * An FFI package would do the same call but cost ~5 MiB resident once loaded, a twentieth of the
 * idle target. Null when the addon is not built or cannot load (another platform): no trim then.
 */
export function loadMallocTrim(path = new URL('../native/build/Release/malloc_trim.node', import.meta.url).pathname) {
  try {
    const addon = createRequire(import.meta.url)(path) as { trim: () => boolean }
    return addon.trim
  } catch {
    return null
  }
}

export type ReclaimOptions = {
  /** how often CPU use is sampled */
  checkMs: number
  /** samples in a row with less than `quietCpu` of one core before the process counts as idle */
  quietChecks: number
  quietCpu: number
  /** resident memory must have grown this much since the last reclaim for another to be worth it */
  minGrowthBytes: number
  /** collect once soon, quiet or not (RECLAIM.startLatestCheck): the caller has just started up */
  atStart: boolean
  /** gives the C heap's free pages back after each collection (loadMallocTrim) */
  trim: (() => boolean) | null
}

const { startLatestCheck, ...reclaimDefaults } = RECLAIM
const RECLAIM_DEFAULTS: Omit<ReclaimOptions, 'trim'> = reclaimDefaults

/**
 * Gives memory back to the system once the process goes quiet after work (start-up included).
 * V8 keeps the heap it grew under load, and pools freed pages, until a collection made to reduce
 * memory; nothing in an idle server triggers one, and glibc keeps freed C memory in its arenas.
 * This runs that collection, then a malloc trim (together a synchronous pause, typically 50-300
 * ms), soon after the call (`atStart`), then at most once per quiet spell and only after resident memory
 * grew, so a steady trickle of requests does not pay it again and again. Needs `gc` (V8_FLAGS);
 * without it this does nothing.
 */
export function reclaimWhenIdle(
  onReclaim: (r: { rssBefore: number; rssAfter: number; ms: number }) => void = () => {},
  opts: Partial<ReclaimOptions> = {},
): () => void {
  const collect = globalThis.gc
  if (!collect) return () => {}
  // the addon only where the caller did not say (null: no trim)
  const o: ReclaimOptions = { ...RECLAIM_DEFAULTS, ...opts, trim: opts.trim === undefined ? loadMallocTrim() : opts.trim }
  let cpu = process.cpuUsage()
  let quiet = 0
  // the lowest resident size since the last collection; none yet: the first quiet spell collects
  let floor = -Infinity
  const reclaim = (rss: number) => {
    const t0 = performance.now()
    collect({ type: 'major', execution: 'sync', flavor: 'last-resort' })
    // after the collection: it frees the native memory that dead JS objects held
    o.trim?.()
    const rssAfter = process.memoryUsage.rss()
    floor = rssAfter
    cpu = process.cpuUsage()
    onReclaim({ rssBefore: rss, rssAfter, ms: performance.now() - t0 })
  }
  // start-up's garbage (module loading, migrations): at the first quiet check, or the
  // startLatestCheck-th whatever the load (on a busy machine the first quiet spell came seconds
  // later, and until then the server held it). Not before the first check: the collection is a
  // synchronous pause, and the first requests after a start are answered before it
  let startPending = o.atStart
  let checks = 0
  const timer = setInterval(() => {
    const used = process.cpuUsage(cpu)
    cpu = process.cpuUsage()
    const rss = process.memoryUsage.rss()
    floor = Math.min(floor, rss)
    const isQuiet = (used.user + used.system) / 1000 <= o.checkMs * o.quietCpu
    if (startPending && (isQuiet || ++checks >= startLatestCheck)) {
      startPending = false
      reclaim(rss)
      return
    }
    if (!isQuiet) {
      quiet = 0
      return
    }
    if (++quiet < o.quietChecks || rss < floor + o.minGrowthBytes) return
    reclaim(rss)
  }, o.checkMs)
  timer.unref()
  return () => clearInterval(timer)
}
