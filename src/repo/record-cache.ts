// Records as the JSON text getRecord and listRecords send ({"uri","cid","value"}) for records
// whose index row has no value text (written before it was kept there), remembered by CID and
// checked against the URI. The index row (URI and CID) is read on every request and a CID
// names one content for good, so an entry is never stale: a put gives the record a new CID, a
// delete removes its row, on whichever process it happens. Bounded by size; eviction gives each
// entry used since its last turn a second chance (a hit only sets a flag: a listRecords page is a
// hundred hits).
import { recordValueJson } from './record-json.js'

const MAX_BYTES = 8 * 1024 * 1024
/** map slot, entry object and string headers, beside the characters themselves */
const ENTRY_OVERHEAD = 160
// eslint-disable-next-line no-control-regex -- NUL..DEL is exactly the ASCII range being tested
const ASCII = /^[\x00-\x7f]*$/

type Entry = { uri: string; json: string; size: number; used: boolean }
const entries = new Map<string, Entry>()
let bytes = 0

/** the record's JSON text, when remembered */
export function cachedRecord(uri: string, cid: string): string | undefined {
  const hit = entries.get(cid)
  // one content at two URIs (identical records) keeps the last one read
  if (!hit || hit.uri !== uri) return undefined
  hit.used = true
  return hit.json
}

/** what getRecord sends and listRecords lists: the record's URI, CID and value */
export function recordEnvelope(uri: string, cid: string, valueJson: string): string {
  return `{"uri":${JSON.stringify(uri)},"cid":${JSON.stringify(cid)},"value":${valueJson}}`
}

/** the record as JSON text, its value from the stored block (the JSON data model: {$link}, {$bytes}) */
export function rememberRecord(uri: string, cid: string, block: Uint8Array): string {
  const json = recordEnvelope(uri, cid, recordValueJson(block))
  // V8 keeps an all-ASCII string at one byte a character, any other at two
  const size = ENTRY_OVERHEAD + cid.length + uri.length + (ASCII.test(json) ? 1 : 2) * json.length
  if (size > MAX_BYTES / 64) return json
  const old = entries.get(cid)
  if (old) {
    entries.delete(cid)
    bytes -= old.size
  }
  bytes += size
  entries.set(cid, { uri, json, size, used: false })
  // a key moved to the end comes round again in this same walk
  for (const [k, e] of entries) {
    if (bytes <= MAX_BYTES) break
    entries.delete(k)
    if (e.used) {
      e.used = false
      entries.set(k, e)
    } else {
      bytes -= e.size
    }
  }
  return json
}
