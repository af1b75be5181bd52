#!/usr/bin/env node
// Process entry for `make serve`: configuration errors print one line and exit 1; SIGTERM and
// SIGINT shut down gracefully and exit 0.
import { ConfigError, loadConfig } from './config.js'
import { startPds } from './server.js'

let config
try {
  config = loadConfig()
} catch (err) {
  if (!(err instanceof ConfigError)) throw err
  process.stderr.write(`config error: ${err.message}\n`)
  process.exit(1)
}

const pds = await startPds(config)
let stopping = false
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return
    stopping = true
    // a hard stop if something hangs: the contract is exit within 5 s
    setTimeout(() => process.exit(1), 4900).unref()
    pds.close().then(
      () => process.exit(0),
      () => process.exit(1),
    )
  })
}
