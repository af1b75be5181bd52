// Sequence numbers never go backwards, as a relay sees them. A relay remembers the last seq it
// read from this host and asks for events after it; a server whose log restarts lower (a restored
// older backup, a reinstall on the same hostname) would have its new events skipped as already
// seen. So the log's next seq is raised above a floor at start: PDS_SEQ_FLOOR (the operator's,
// e.g. the relay's cursor `pds doctor` reports), and a file beside the data that records the
// highest seq this data directory has handed out. `pds restore` writes the time (milliseconds
// since the epoch) there: above anything a server sequencing fewer than a thousand events a
// second since its last restore can have emitted, with no record of the old server needed.
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const FILE = 'seq-floor'

/** the floor recorded in `dataDir`, 0 when none */
export function readSeqFloor(dataDir: string): number {
  const file = join(dataDir, FILE)
  if (!existsSync(file)) return 0
  const n = Number(readFileSync(file, 'utf8').trim())
  return Number.isSafeInteger(n) && n > 0 ? n : 0
}

/** records `seq` as handed out from `dataDir`, unless a higher floor is recorded already */
export function recordSeqFloor(dataDir: string, seq: number): void {
  if (!Number.isSafeInteger(seq) || seq <= readSeqFloor(dataDir)) return
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const file = join(dataDir, FILE)
  const tmp = `${file}.tmp`
  writeFileSync(tmp, `${seq}\n`, { mode: 0o600 })
  chmodSync(tmp, 0o600)
  renameSync(tmp, file)
}

/** what `pds restore` records: the time, above every seq the backed-up server can have emitted */
export const restoredSeqFloor = () => Date.now()
