#!/usr/bin/env node
// Process entry for `make serve`: configuration errors print one line and exit 1; SIGTERM and
// SIGINT shut down gracefully and exit 0.
import { ConfigError, loadConfig, runtimeEnv } from './config.js'
import { reclaimWhenIdle, tuneRuntime } from './runtime.js'

// first, before the server's modules load: this may re-execute the process
tuneRuntime(runtimeEnv())

let config
try {
  config = loadConfig()
} catch (err) {
  if (!(err instanceof ConfigError)) throw err
  process.stderr.write(`config error: ${err.message}\n`)
  process.exit(1)
}

const { startPds } = await import('./server.js')
const pds = await startPds(config)
const stopReclaim = reclaimWhenIdle(({ rssBefore, rssAfter, ms }) =>
  pds.services.logger.debug({ rssBefore, rssAfter, ms: Math.round(ms) }, 'idle: memory reclaimed'),
)
let stopping = false
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return
    stopping = true
    stopReclaim()
    // a hard stop if something hangs: the contract is exit within 5 s
    setTimeout(() => process.exit(1), 4900).unref()
    pds.close().then(
      () => process.exit(0),
      () => process.exit(1),
    )
  })
}
