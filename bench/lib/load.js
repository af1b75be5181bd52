// The load loop: `concurrency` workers call `op` until a fixed count or a fixed duration is
// reached (and never past a hard deadline), so every run stops by itself.
import { performance } from 'node:perf_hooks'

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[i]
}

/**
 * op(i, worker) -> units (number, e.g. bytes or records; default 1) or throws.
 * `isExpected(err)` lets a scenario count a specific error answer as a successful op
 * (e.g. a wrong-password login answering 401).
 */
export async function runLoad({ concurrency, count, durationMs, hardLimitMs = 300_000, op, isExpected }) {
  const latencies = []
  const errorSamples = new Map()
  let errors = 0
  let units = 0
  let next = 0
  const start = performance.now()
  const deadline = durationMs ? start + durationMs : Infinity
  const hardDeadline = start + hardLimitMs
  const worker = async (w) => {
    for (;;) {
      const now = performance.now()
      if (now >= hardDeadline) return
      let i
      if (count !== undefined) {
        i = next++
        if (i >= count) return
      } else {
        if (now >= deadline) return
        i = next++
      }
      const t0 = performance.now()
      try {
        const u = await op(i, w)
        latencies.push(performance.now() - t0)
        units += typeof u === 'number' ? u : 1
      } catch (err) {
        if (isExpected?.(err)) {
          latencies.push(performance.now() - t0)
          units += 1
          continue
        }
        errors++
        const key = String(err?.message ?? err).slice(0, 160)
        errorSamples.set(key, (errorSamples.get(key) ?? 0) + 1)
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)))
  const elapsedMs = performance.now() - start
  latencies.sort((a, b) => a - b)
  return {
    ops: latencies.length,
    errors,
    errorSamples: Object.fromEntries(errorSamples),
    elapsedMs,
    units,
    latencies,
  }
}
