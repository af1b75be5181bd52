// Lexicon resolution: which DID publishes an NSID's schema, and the schema itself. The authority
// is the NSID's domain (its segments reversed, the name dropped), whose `_lexicon` TXT record says
// `did=<did>`; PDS_LEXICON_AUTHORITY_DID replaces that lookup for every NSID. The document is the
// DID's `com.atproto.lexicon.schema` record keyed by the NSID: read from this server's own store
// when the DID is one of its accounts, otherwise from the PDS its DID document names, through the
// outbound guard. Answers are cached per process (an hour; a failure for half a minute), so an
// authorization request and the code it turns into do not fetch twice.
import { isValidDid, NSID } from '@atproto/syntax'
import type { Config } from '../config.js'
import type { Db } from '../db/index.js'
import { serviceEndpoint, type DidResolver } from '../identity/did-resolver.js'
import type { OutboundGuard } from '../net/guard.js'
import { readCapped } from '../outbound.js'
import { findRepoAccount, recordAsJson } from '../repo/read.js'
import { LEXICON_SCHEMA_COLLECTION, LexiconDocError, parseLexiconRecord, type PublishedLexicon } from './documents.js'

export class LexiconResolutionError extends Error {}

export type LexiconResolverDeps = {
  db: Db
  config: Pick<Config, 'lexiconAuthorityDid'>
  didResolver: DidResolver
  outbound: OutboundGuard
}

type Entry = { doc: PublishedLexicon; expires: number } | { error: string; expires: number }

const TTL_MS = 60 * 60 * 1000
const FAIL_TTL_MS = 30 * 1000
const MAX_ENTRIES = 1000
const TIMEOUT_MS = 5000
const MAX_RECORD_BYTES = 256 * 1024

export class LexiconResolver {
  private cache = new Map<string, Entry>()
  // concurrent requests for one NSID share a single lookup
  private pending = new Map<string, Promise<Entry>>()

  constructor(private deps: LexiconResolverDeps) {}

  /** the published document for `nsid`; LexiconResolutionError saying why when there is none */
  async resolve(nsid: string): Promise<PublishedLexicon> {
    let entry = this.cache.get(nsid)
    if (!entry || entry.expires <= Date.now()) {
      let p = this.pending.get(nsid)
      if (!p) {
        p = this.load(nsid).finally(() => this.pending.delete(nsid))
        this.pending.set(nsid, p)
      }
      entry = await p
    }
    if ('error' in entry) throw new LexiconResolutionError(entry.error)
    return entry.doc
  }

  private async load(nsid: string): Promise<Entry> {
    let entry: Entry
    try {
      entry = { doc: await this.fetchDoc(nsid), expires: Date.now() + TTL_MS }
    } catch (err) {
      // anything else (the database failing) is not an answer about the lexicon and is not remembered
      if (!(err instanceof LexiconResolutionError)) throw err
      entry = { error: err.message, expires: Date.now() + FAIL_TTL_MS }
    }
    this.cache.delete(nsid)
    if (this.cache.size >= MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value as string)
    this.cache.set(nsid, entry)
    return entry
  }

  private async fetchDoc(nsid: string): Promise<PublishedLexicon> {
    let parsed: NSID
    try {
      parsed = NSID.parse(nsid)
    } catch {
      throw new LexiconResolutionError(`${nsid} is not a valid NSID`)
    }
    const did = await this.authorityDid(parsed)
    const value = await this.schemaRecord(did, nsid)
    try {
      return parseLexiconRecord(value, nsid)
    } catch (err) {
      if (err instanceof LexiconDocError)
        throw new LexiconResolutionError(`the schema ${did} publishes for ${nsid} is invalid: ${err.message}`)
      throw err
    }
  }

  private async authorityDid(nsid: NSID): Promise<string> {
    if (this.deps.config.lexiconAuthorityDid) return this.deps.config.lexiconAuthorityDid
    const name = `_lexicon.${nsid.authority}`
    let records: string[]
    try {
      records = await this.deps.outbound.resolveTxt(name)
    } catch {
      records = []
    }
    const dids = new Set(records.filter((r) => r.startsWith('did=')).map((r) => r.slice('did='.length).trim()))
    // two different answers say nothing reliable about who the authority is
    if (dids.size !== 1) throw new LexiconResolutionError(`no single did= TXT record at ${name}`)
    const [did] = dids
    if (!isValidDid(did)) throw new LexiconResolutionError(`the TXT record at ${name} does not name a valid DID`)
    return did
  }

  private async schemaRecord(did: string, nsid: string): Promise<unknown> {
    const uri = `at://${did}/${LEXICON_SCHEMA_COLLECTION}/${nsid}`
    const account = await findRepoAccount(this.deps.db, did)
    if (account) {
      // ours: read the store, as getRecord here would answer
      const rec = account.status === 'takendown' ? undefined : await recordAsJson(this.deps.db, did, uri)
      if (!rec) throw new LexiconResolutionError(`${uri} does not exist`)
      return (JSON.parse(rec.json) as { value?: unknown }).value
    }
    const doc = await this.deps.didResolver.resolve(did)
    const pds = doc && serviceEndpoint(doc, '#atproto_pds')
    if (!pds) throw new LexiconResolutionError(`${did} names no PDS`)
    const url = new URL(`${pds}/xrpc/com.atproto.repo.getRecord`)
    url.search = new URLSearchParams({ repo: did, collection: LEXICON_SCHEMA_COLLECTION, rkey: nsid }).toString()
    let body: { uri?: unknown; value?: unknown }
    try {
      const res = await this.deps.outbound.request(url, {
        method: 'GET',
        headers: { accept: 'application/json' },
        headersTimeout: TIMEOUT_MS,
        bodyTimeout: TIMEOUT_MS,
        signal: AbortSignal.timeout(TIMEOUT_MS),
      })
      if (res.statusCode !== 200) {
        await res.body.dump()
        throw new LexiconResolutionError(`${uri} could not be fetched (status ${res.statusCode})`)
      }
      const bytes = await readCapped(res.body, MAX_RECORD_BYTES)
      if (!bytes) throw new LexiconResolutionError(`${uri} is too large`)
      body = JSON.parse(bytes.toString('utf8'))
    } catch (err) {
      if (err instanceof LexiconResolutionError) throw err
      throw new LexiconResolutionError(`${uri} could not be fetched`)
    }
    if (!body || typeof body !== 'object' || body.uri !== uri)
      throw new LexiconResolutionError(`${pds} answered for another record than ${uri}`)
    return body.value
  }
}
