// `pds blobs gc [--dry-run]`: what the background sweeper removes (uploads no record used within
// PDS_BLOB_GRACE_SECONDS, blobs whose last record was deleted, blobs of deleted accounts), one line
// each with its size, removed unless --dry-run. Safe while the server runs: it takes the same locks.
import { openBlobStore } from '../blob/blobstore-open.js'
import { findSweepable, freesBytes, sweepBlobs, type Sweepable } from '../blob/blobstore-gc.js'
import type { Command } from './accounts.js'

// the most rows one run lists or removes
const MAX_ROWS = 1_000_000

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`

export const blobsCommands: Record<string, Command> = {
  gc: {
    usage:
      'blobs gc [--dry-run]   removes blobs no record references (after PDS_BLOB_GRACE_SECONDS) and those of\n' +
      '    deleted accounts, one line each with its size; --dry-run only lists them',
    options: { 'dry-run': { type: 'boolean' } },
    async run({ config, db }, p) {
      const dryRun = !!p.values['dry-run']
      const blobstore = await openBlobStore(config)
      const now = Date.now()
      let rows: Sweepable[] = []
      let freed = 0
      let staged = 0
      try {
        if (dryRun) {
          rows = await findSweepable(db, config.blobGraceMs, now, MAX_ROWS)
          const frees = await freesBytes(db, rows)
          // each CID's bytes once, and only when no other account keeps them
          for (const [cid, size] of new Map(rows.map((r) => [r.cid, r.size]))) if (frees.has(cid)) freed += size
        } else {
          // passes until one removes nothing: rows that stopped qualifying are skipped, not retried
          while (rows.length < MAX_ROWS) {
            const pass = await sweepBlobs({ db, blobstore }, config.blobGraceMs, now)
            rows.push(...pass.removed)
            freed += pass.bytes
            staged += pass.staged
            if (pass.removed.length === 0) break
          }
        }
      } finally {
        ;(blobstore as { destroy?: () => void }).destroy?.()
      }
      if (p.json) {
        process.stdout.write(
          JSON.stringify({ dryRun, blobs: rows, count: rows.length, bytesFreed: freed, stagedRemoved: staged }, null, 2) + '\n',
        )
        return 0
      }
      for (const r of rows) process.stdout.write(`${r.cid}  ${r.size} bytes  ${r.did}  ${r.reason}\n`)
      process.stdout.write(`${dryRun ? 'would remove' : 'removed'} ${plural(rows.length, 'blob')}, ${freed} bytes freed from the store\n`)
      if (staged) process.stdout.write(`removed ${plural(staged, 'temporary upload')} a crash left behind\n`)
      return 0
    },
  },
}
