// Turns a write request into what the writer commits: checked collection and rkey, the record as
// IPLD with its CID, its validation status and the blobs it references.
import { TID } from '@atproto/common'
import { jsonToLex, lexToIpld, lexToJson } from '@atproto/lexicon'
import { encode } from '@atproto/lex-cbor'
import type { Cid, LexMap } from '@atproto/lex-data'
import { isValidNsid, isValidRecordKey } from '@atproto/syntax'
import { xrpcError } from '../errors.js'
import { LEXICON_SCHEMA_COLLECTION, LexiconDocError, parseLexiconRecord } from '../lexicon/documents.js'
import { cidForDagCbor } from '../encoding/node-cbor.js'

export type ValidationStatus = 'valid' | 'unknown'

type Lexicons = (typeof import('@atproto/api'))['lexicons']
let loaded: Lexicons | undefined
/**
 * The official lexicons (~40 MiB of schemas) load on the first validated write, not at start;
 * kept once loaded, as an import() of a loaded module still resolves its specifier every time.
 */
export async function officialLexicons(): Promise<Lexicons> {
  return (loaded ??= (await import('@atproto/api')).lexicons)
}

export type PreparedRecordWrite = {
  action: 'create' | 'update'
  collection: string
  rkey: string
  uri: string
  record: LexMap
  cid: Cid
  /** the record's DAG-CBOR block, `cid` its hash */
  bytes: Uint8Array
  blobs: string[]
  validationStatus?: ValidationStatus
  /** putRecord: an update of a missing record creates it */
  upsert?: boolean
  /** CID the current record must have; null: the record must not exist */
  swapCid?: string | null
}
export type PreparedDelete = {
  action: 'delete'
  collection: string
  rkey: string
  uri: string
  swapCid?: string
  /** deleteRecord: deleting a missing record is a no-op rather than an error */
  ignoreMissing?: boolean
}
export type PreparedWrite = PreparedRecordWrite | PreparedDelete

export function checkCollection(collection: string): string {
  if (!isValidNsid(collection)) throw xrpcError('InvalidRequest', `Invalid collection NSID: ${collection}`)
  return collection
}

export function checkRkey(rkey: string): string {
  if (!isValidRecordKey(rkey)) throw xrpcError('InvalidRequest', `Invalid record key: ${rkey}`)
  return rkey
}

export async function prepareRecordWrite(
  did: string,
  w: {
    action: 'create' | 'update'
    collection: string
    rkey?: string
    record: unknown
    validate?: boolean
    upsert?: boolean
    swapCid?: string | null
  },
): Promise<PreparedRecordWrite> {
  const collection = checkCollection(w.collection)
  const rkey = checkRkey(w.rkey ?? TID.nextStr())
  if (!w.record || typeof w.record !== 'object' || Array.isArray(w.record)) {
    throw xrpcError('InvalidRequest', 'Record must be an object')
  }
  // the body may arrive as plain JSON or already lex-typed: normalize through JSON once
  let lex: Record<string, unknown>
  try {
    lex = jsonToLex(lexToJson(w.record)) as Record<string, unknown>
  } catch (err) {
    throw xrpcError('InvalidRequest', `Invalid record: ${(err as Error).message}`)
  }
  if (lex.$type === undefined) lex = { ...lex, $type: collection }
  if (lex.$type !== collection) {
    throw xrpcError('InvalidRequest', `Invalid $type: expected ${collection}, got ${String(lex.$type)}`)
  }
  if (collection === LEXICON_SCHEMA_COLLECTION) {
    // checked whatever `validate` says: this server resolves permission sets from these records
    try {
      parseLexiconRecord(lexToJson(lex), rkey)
    } catch (err) {
      if (err instanceof LexiconDocError) throw xrpcError('InvalidRequest', `Invalid ${collection} record: ${err.message}`)
      throw err
    }
  }
  let validationStatus: ValidationStatus | undefined
  if (w.validate !== false) {
    const lexicons = await officialLexicons()
    if (lexicons.getDef(collection)?.type === 'record') {
      try {
        lexicons.assertValidRecord(collection, lex)
      } catch (err) {
        throw xrpcError('InvalidRequest', `Invalid ${collection} record: ${(err as Error).message}`)
      }
      validationStatus = 'valid'
    } else if (w.validate === true) {
      throw xrpcError('InvalidRequest', `Lexicon not found: lex:${collection}`)
    } else {
      validationStatus = 'unknown'
    }
  }
  // lexToIpld is typed `unknown`; an object in is the same object, its blob refs as CIDs, out
  const record = lexToIpld(lex) as LexMap
  let bytes: Uint8Array
  try {
    bytes = encode(record)
  } catch (err) {
    // e.g. floats, which the atproto data model does not allow
    throw xrpcError('InvalidRequest', `Invalid record: ${(err as Error).message}`)
  }
  return {
    action: w.action,
    collection,
    rkey,
    uri: `at://${did}/${collection}/${rkey}`,
    record,
    cid: cidForDagCbor(bytes),
    bytes,
    blobs: blobRefs(record),
    validationStatus,
    upsert: w.upsert,
    swapCid: w.swapCid,
  }
}

export function prepareDelete(
  did: string,
  w: { collection: string; rkey: string; swapCid?: string; ignoreMissing?: boolean },
): PreparedDelete {
  const collection = checkCollection(w.collection)
  const rkey = checkRkey(w.rkey)
  return {
    action: 'delete',
    collection,
    rkey,
    uri: `at://${did}/${collection}/${rkey}`,
    swapCid: w.swapCid,
    ignoreMissing: w.ignoreMissing,
  }
}

/** CIDs of every blob a record references: `{$type: 'blob', ref}` and the legacy `{cid, mimeType}` */
export function blobRefs(value: unknown, out = new Set<string>()): string[] {
  if (Array.isArray(value)) {
    for (const v of value) blobRefs(v, out)
  } else if (value && typeof value === 'object' && !(value instanceof Uint8Array) && !isCidLike(value)) {
    const o = value as Record<string, unknown>
    if (o.$type === 'blob' && isCidLike(o.ref)) out.add(String(o.ref))
    else if (typeof o.cid === 'string' && typeof o.mimeType === 'string' && Object.keys(o).length === 2) out.add(o.cid)
    else for (const v of Object.values(o)) blobRefs(v, out)
  }
  return [...out]
}

function isCidLike(v: unknown): boolean {
  return !!v && typeof v === 'object' && (v as { asCID?: unknown }).asCID === v
}

/** the response of createRecord and putRecord: the record's uri and cid, and the commit */
export function recordWriteOutput(write: PreparedRecordWrite, commit: { cid: string; rev: string }) {
  return {
    encoding: 'application/json' as const,
    body: {
      uri: write.uri,
      cid: write.cid.toString(),
      commit,
      ...(write.validationStatus ? { validationStatus: write.validationStatus } : {}),
    },
  }
}
