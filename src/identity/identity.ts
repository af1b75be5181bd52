// A full identity from a handle or a DID: the DID, its document, and the handle only when both
// directions agree (the document claims the handle and the handle resolves back to the DID);
// otherwise the handle is `handle.invalid`.
import { isValidHandle, normalizeHandle } from '@atproto/syntax'
import type { Config } from '../config.js'
import type { Db } from '../db/index.js'
import type { OutboundGuard } from '../net/guard.js'
import type { DidResolver } from './did-resolver.js'
import { xrpcError } from '../errors.js'
import { didDocFor } from './plc.js'
import { resolveFromDirectory } from './directory.js'
import { resolveHandleDid } from './handle-resolver.js'

const HANDLE_INVALID = 'handle.invalid'

type Deps = { db: Db; config: Pick<Config, 'plcUrl' | 'handleDomains'>; didResolver: DidResolver; outbound: OutboundGuard }
type Opts = { fresh?: boolean }
type Doc = { [k: string]: unknown }

export async function resolveIdentity(deps: Deps, identifier: string, opts: Opts = {}) {
  if (identifier.startsWith('did:')) {
    const didDoc = await didDocument(deps, identifier, opts)
    const claimed = claimedHandle(didDoc)
    const verified = claimed !== undefined && (await resolveHandleDid(deps, claimed, opts)) === identifier
    return { did: identifier, handle: verified ? claimed : HANDLE_INVALID, didDoc }
  }
  const handle = normalizeHandle(identifier)
  const did = await resolveHandleDid(deps, handle, opts)
  if (!did) throw xrpcError('HandleNotFound', `Unable to resolve handle: ${handle}`)
  const didDoc = await didDocument(deps, did, opts)
  return { did, handle: claimedHandle(didDoc) === handle ? handle : HANDLE_INVALID, didDoc }
}

/** a hosted DID's document, as resolveDid answers it; DidNotFound / DidDeactivated otherwise */
export async function hostedDidDocument({ db, config }: Pick<Deps, 'db' | 'config'>, did: string): Promise<Doc> {
  const account = await db.selectFrom('account').select('status').where('did', '=', did).executeTakeFirst()
  if (!account || account.status === 'deleted') throw xrpcError('DidNotFound', `DID not found: ${did}`)
  if (account.status === 'takendown') throw xrpcError('DidDeactivated', `DID is deactivated: ${did}`)
  const doc = config.plcUrl && did.startsWith('did:plc:') ? await resolveFromDirectory(config.plcUrl, did) : await didDocFor(db, did)
  if (!doc) throw xrpcError('DidNotFound', `DID not found: ${did}`)
  return doc
}

// hosted DIDs first (read live, nothing cached); any other through the shared resolver
async function didDocument(deps: Deps, did: string, opts: Opts): Promise<Doc> {
  const hosted = await deps.db.selectFrom('account').select('did').where('did', '=', did).executeTakeFirst()
  if (hosted) return hostedDidDocument(deps, did)
  const doc = await deps.didResolver.resolve(did, opts)
  if (!doc) throw xrpcError('DidNotFound', `DID not found: ${did}`)
  return doc
}

/** the handle the document's first at:// alias names, when it is a valid handle */
function claimedHandle(doc: Doc): string | undefined {
  const aka = Array.isArray(doc.alsoKnownAs) ? doc.alsoKnownAs : []
  const first = aka.find((a): a is string => typeof a === 'string' && a.startsWith('at://'))
  const handle = first && normalizeHandle(first.slice('at://'.length))
  return handle && isValidHandle(handle) ? handle : undefined
}
