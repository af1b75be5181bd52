// Record values as the JSON text getRecord and listRecords send, remembered by DID and CID. The
// index row (and so the CID) is read on every request and a CID names one content for good, so an
// entry is never stale: a put gives the record a new CID, a delete removes its row, on whichever
// process it happens. Bounded by size; eviction gives each entry used since its last turn a second
// chance (a hit only sets a flag: a listRecords page is a hundred hits).
import { lexToJson } from '@atproto/lexicon'
import { decode as decodeCbor, type TagDecoder } from 'cborg'
import { CID } from 'multiformats/cid'

const MAX_BYTES = 8 * 1024 * 1024
/** map entry, key and bookkeeping, beside the text itself */
const ENTRY_OVERHEAD = 200

type Entry = { json: string; size: number; used: boolean }
const entries = new Map<string, Entry>()
let bytes = 0

const keyOf = (did: string, cid: string) => `${did} ${cid}`

export function cachedRecordJson(did: string, cid: string): string | undefined {
  const hit = entries.get(keyOf(did, cid))
  if (!hit) return undefined
  hit.used = true
  return hit.json
}

/** the value of a stored record block as JSON text (the JSON data model: {$link}, {$bytes}) */
export function rememberRecordJson(did: string, cid: string, block: Uint8Array): string {
  const json = JSON.stringify(lexToJson(recordJson(block) as Parameters<typeof lexToJson>[0]))
  const key = keyOf(did, cid)
  // strings count two bytes a character: an upper bound
  const size = ENTRY_OVERHEAD + 2 * (key.length + json.length)
  if (size > MAX_BYTES / 64 || entries.has(key)) return json
  bytes += size
  entries.set(key, { json, size, used: false })
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

// DAG-CBOR tag 42 is a CID (after a 0x00 prefix); a record value carries it as {$link}
const recordTags: TagDecoder[] = []
recordTags[42] = (bytes: Uint8Array) => ({ $link: CID.decode(bytes.subarray(1)).toString() })

/**
 * A stored record block as the value repo.getRecord / listRecords return: one decoding pass
 * straight to the JSON data model's shapes (a CID as {$link}); byte strings stay bytes, which
 * lexToJson writes as {$bytes}. Blocks are ours, written by the DAG-CBOR encoder.
 */
function recordJson(bytes: Uint8Array): { [k: string]: unknown } {
  return decodeCbor(bytes, { tags: recordTags }) as { [k: string]: unknown }
}
