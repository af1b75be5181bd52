// Names of spaces and of the records in them. A space is `at://{authority DID}/space/{type}/{skey}`
// and a record in it appends `/{author DID}/{collection}/{rkey}`; the literal `space` segment marks a
// permissioned URI (a public collection NSID always has dots). Handles are never accepted, and a
// reference is compared byte for byte, never normalized: credentials carry it verbatim.
import { isValidDid, isValidNsid, isValidRecordKey } from '@atproto/syntax'
import { spaceError } from './errors.js'

export type SpaceRef = { authority: string; type: string; skey: string; uri: string }
export type SpaceRecordRef = { space: SpaceRef; author: string; collection: string; rkey: string; uri: string }

const SKEY_MAX = 512

/** record-key syntax: 1-512 of `[A-Za-z0-9._:~-]`, not `.` or `..` */
export const isValidSkey = (skey: string) => skey.length <= SKEY_MAX && isValidRecordKey(skey)

/** the space `uri` names; InvalidRequest saying what is wrong otherwise */
export function parseSpaceRef(uri: string, what = 'space'): SpaceRef {
  const ref = readSpaceRef(uri)
  if (typeof ref === 'string')
    throw spaceError('InvalidRequest', `${what} must be a space reference at://{authority DID}/space/{type}/{skey}: ${ref}`)
  return ref
}

export function isSpaceRef(uri: string): boolean {
  return typeof readSpaceRef(uri) !== 'string'
}

/** the reference of a space given by its parts; InvalidRequest when a part is malformed */
export function spaceRef(authority: string, type: string, skey: string): SpaceRef {
  const uri = `at://${authority}/space/${type}/${skey}`
  return parseSpaceRef(uri)
}

/** the record URI `at://{authority}/space/{type}/{skey}/{author}/{collection}/{rkey}`; InvalidRequest when a part is malformed */
export function spaceRecordUri(space: SpaceRef, author: string, collection: string, rkey: string): string {
  return parseSpaceRecordUri(`${space.uri}/${author}/${collection}/${rkey}`).uri
}

/** a record URI of a space; InvalidRequest saying what is wrong otherwise */
export function parseSpaceRecordUri(uri: string, what = 'uri'): SpaceRecordRef {
  const bad = (why: string) => spaceError('InvalidRequest', `${what} must be a space record URI: ${why}`)
  const parts = uri.split('/')
  if (parts.length !== 9) throw bad('expected at://{authority}/space/{type}/{skey}/{author}/{collection}/{rkey}')
  const space = readSpaceRef(parts.slice(0, 6).join('/'))
  if (typeof space === 'string') throw bad(space)
  const [author, collection, rkey] = parts.slice(6)
  if (!isValidDid(author)) throw bad('the author must be a DID')
  if (!isValidNsid(collection)) throw bad('the collection must be an NSID')
  if (!isValidRecordKey(rkey)) throw bad('the record key is malformed')
  return { space, author, collection, rkey, uri }
}

/** whether an at:// URI names permissioned data (its second segment is literally `space`) */
export const isSpaceUri = (uri: string) => uri.startsWith('at://') && uri.split('/')[3] === 'space'

/** the audience delegation tokens and client attestations are addressed to */
export const spaceHostAudience = (authority: string) => `${authority}#atproto_space_host`

// the parsed reference, or why it is not one
function readSpaceRef(uri: string): SpaceRef | string {
  if (typeof uri !== 'string') return 'not a string'
  if (!uri.startsWith('at://')) return 'it must start with at://'
  const parts = uri.slice('at://'.length).split('/')
  if (parts.length !== 4) return 'expected exactly authority, "space", type and skey (no record path, query or trailing slash)'
  const [authority, marker, type, skey] = parts
  if (!isValidDid(authority)) return 'the authority must be a DID'
  if (marker !== 'space') return 'the second segment must be "space"'
  if (!isValidNsid(type)) return 'the space type must be an NSID'
  if (!isValidSkey(skey)) return 'the skey must be 1-512 characters of A-Z a-z 0-9 . _ : ~ - and not "." or ".."'
  return { authority, type, skey, uri }
}
