#!/usr/bin/env node
// Process entry for `make serve`: configuration errors and the common mistakes at start (port in
// use, database, Redis or S3 unreachable or refusing, data directory not writable, disk full)
// print one line and exit 1; SIGTERM and SIGINT shut down gracefully and exit 0.
import { ConfigError, loadConfig, runtimeEnv, type Config } from './config.js'
import { explainStartError, StartupError } from './startup-errors.js'
import { reclaimWhenIdle, tuneRuntime } from './runtime.js'

// first, before the server's modules load: this may re-execute the process
tuneRuntime(runtimeEnv())

let config: Config
try {
  config = loadConfig()
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`config error: ${err.message}\n`)
    process.exit(1)
  }
  // writing generated secrets into the data directory: not writable, or the disk is full
  const code = (err as { code?: unknown }).code
  if (typeof code !== 'string' || !/^E[A-Z]+$/.test(code)) throw err
  const path = (err as { path?: unknown }).path
  const dataDir = typeof path === 'string' ? path : 'the data directory'
  const partial = { port: 0, bind: '', dataDir, blobDir: dataDir, db: { kind: 'sqlite', file: '' } } as const
  process.stderr.write(`pds: cannot start: ${explainStartError('data', err, partial)}\n`)
  process.exit(1)
}

const { startPds } = await import('./server.js')
let pds
try {
  pds = await startPds(config)
} catch (err) {
  if (!(err instanceof StartupError)) throw err
  process.stderr.write(`pds: cannot start: ${err.message}\n`)
  process.exit(1)
}
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
