// Read-after-write: the AppView learns of a write only from the firehose, so right after writing
// a person may read an answer that lacks it. The AppView says, in `atproto-repo-rev`, the last
// revision of the requester's repository it has indexed; when this server holds newer records of
// the requester (a profile, posts), the answers of six methods are amended with them: the JSON is
// read (bounded), checked against the method's lexicon, changed, checked again, and sent with
// `atproto-upstream-lag` (milliseconds since the oldest record the AppView had not seen) instead of
// the AppView's `atproto-repo-rev`. Only the requester's own records are used; any doubt (no
// header, not JSON, too large, an unknown encoding, invalid either side) sends the AppView's
// answer as it came.
import { Readable } from 'node:stream'
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib'
import type { IncomingHttpHeaders } from 'node:http'
import type { Services } from '../context.js'
import { getAccount } from '../account/store.js'
import { findRepoAccount, hasRecordAtOrBefore, recordAsJson, recordIfSince, recordsSince, repoHead } from '../repo/read.js'
import { officialLexicons } from '../repo/prepare.js'
import { LocalViews } from './views.js'
import * as munges from './munge.js'
import type { LocalRecords, Munge } from './munge.js'

type Json = Record<string, any>
export type Upstream = { statusCode: number; headers: IncomingHttpHeaders; body: Readable }
type Deps = Pick<Services, 'config' | 'db' | 'tokenKeys' | 'logger'>

const METHODS: Record<string, Munge> = {
  'app.bsky.actor.getProfile': munges.getProfile,
  'app.bsky.actor.getProfiles': munges.getProfiles,
  'app.bsky.feed.getAuthorFeed': munges.getAuthorFeed,
  'app.bsky.feed.getTimeline': munges.getTimeline,
  'app.bsky.feed.getPostThread': munges.getPostThread,
  'app.bsky.feed.getActorLikes': munges.getActorLikes,
}

/** answers larger than this go through untouched */
export const MAX_MUNGED_BYTES = 1024 * 1024
/** at most this many new posts are merged */
const MAX_LOCAL_POSTS = 10
/** how many of the newest post keys are looked at for posts the AppView has not seen */
const POST_SCAN = 50
const REV = /^[234567abcdefghij][234567abcdefghijklmnopqrstuvwxyz]{12}$/

export const isReadAfterWrite = (nsid: string) => Object.hasOwn(METHODS, nsid)

/** the AppView's answer to `nsid` for `did`, amended with the records it has not indexed yet */
export async function readAfterWrite(deps: Deps, call: { nsid: string; did: string; url: string }, upstream: Upstream): Promise<Upstream> {
  const munge = METHODS[call.nsid]
  const rev = header(upstream.headers, 'atproto-repo-rev')
  if (!munge || !rev || !REV.test(rev)) return upstream
  const notFound = upstream.statusCode === 400 && call.nsid === 'app.bsky.feed.getPostThread'
  if (upstream.statusCode !== 200 && !notFound) return upstream
  if (!/^application\/(?:[\w.+-]+\+)?json\b/i.test(header(upstream.headers, 'content-type') ?? '')) return upstream
  const encoding = (header(upstream.headers, 'content-encoding') ?? 'identity').trim().toLowerCase()
  if (!DECODERS[encoding]) return upstream
  if (Number(header(upstream.headers, 'content-length') ?? 0) > MAX_MUNGED_BYTES) return upstream

  const local = await localRecords(deps, call.did, rev)
  if (!local) return upstream
  const read = await readUpTo(upstream.body, MAX_MUNGED_BYTES)
  if (read.rest) return { ...upstream, body: read.rest }
  const original = { ...upstream, body: Readable.from([read.bytes]) }
  try {
    const body = JSON.parse(DECODERS[encoding](read.bytes).toString('utf8'))
    const account = await getAccount(deps.db, call.did)
    if (!account) return original
    const handle = account.handle ?? 'handle.invalid'
    const profile = await recordAsJson(deps.db, call.did, `at://${call.did}/app.bsky.actor.profile/self`)
    const views = new LocalViews(deps, call.did, handle, profile ? JSON.parse(profile.json).value : undefined)
    const params = new URL(call.url, 'http://local').searchParams
    let munged: Json | undefined
    if (notFound) {
      munged = body?.error === 'NotFound' ? await threadFromLocal(deps, views, { did: call.did, params }, local) : undefined
    } else {
      const lexicons = await officialLexicons()
      lexicons.assertValidXrpcOutput(call.nsid, body)
      munged = await munge(views, body, local, { did: call.did, handle, params })
      if (munged === body) return original
    }
    if (!munged) return original
    ;(await officialLexicons()).assertValidXrpcOutput(call.nsid, munged)
    return amended(upstream.headers, munged, local)
  } catch (err) {
    deps.logger.warn({ err: String(err), nsid: call.nsid }, 'read-after-write left the answer as it came')
    return original
  }
}

/** the requester's profile and posts newer than `rev`; undefined when there are none */
async function localRecords(deps: Deps, did: string, rev: string): Promise<LocalRecords | undefined> {
  const head = await repoHead(deps.db, did)
  if (!head || head.rev <= rev) return undefined
  // a rev older than every record here names another history (an account that moved in): not ours to compare
  if (!(await hasRecordAtOrBefore(deps.db, did, rev))) return undefined
  const [profile, posts] = await Promise.all([
    recordIfSince(deps.db, did, 'app.bsky.actor.profile', 'self', rev),
    recordsSince(deps.db, did, 'app.bsky.feed.post', rev, POST_SCAN),
  ])
  if (!profile && posts.length === 0) return undefined
  return { profile, posts: posts.slice(-MAX_LOCAL_POSTS) }
}

/** getPostThread of the requester's own post the AppView does not know yet */
async function threadFromLocal(deps: Deps, views: LocalViews, call: { did: string; params: URLSearchParams }, local: LocalRecords) {
  const uri = call.params.get('uri') ?? ''
  const m = /^at:\/\/([^/]+)\/app\.bsky\.feed\.post\/([^/?#]+)$/.exec(uri)
  if (!m) return undefined
  const owner = m[1].startsWith('did:') ? m[1] : (await findRepoAccount(deps.db, m[1]))?.did
  if (owner !== call.did) return undefined
  const post = local.posts.find((p) => p.uri.endsWith(`/app.bsky.feed.post/${m[2]}`))
  if (!post) return undefined
  let thread: Json = { $type: 'app.bsky.feed.defs#threadViewPost', post: await views.postView(post) }
  thread = await munges.addRepliesToThread(
    views,
    thread,
    local.posts.filter((p) => p !== post),
  )
  const parent = (post.value.reply as Json | undefined)?.parent?.uri
  if (parent) {
    const params: Record<string, string> = { uri: parent, depth: '0' }
    const height = call.params.get('parentHeight')
    if (height) params.parentHeight = height
    const above = await views.appView('app.bsky.feed.getPostThread', params).catch(() => undefined)
    if (above?.thread) thread.parent = above.thread
  }
  return { thread }
}

function amended(headers: IncomingHttpHeaders, body: Json, local: LocalRecords): Upstream {
  const bytes = Buffer.from(JSON.stringify(body), 'utf8')
  const out: IncomingHttpHeaders = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(bytes.length),
  }
  const labelers = header(headers, 'atproto-content-labelers')
  if (labelers) out['atproto-content-labelers'] = labelers
  const oldest = [local.profile, ...local.posts].reduce<string | undefined>(
    (min, r) => (r && (!min || r.indexedAt < min) ? r.indexedAt : min),
    undefined,
  )
  if (oldest) out['atproto-upstream-lag'] = String(Math.max(0, Date.now() - Date.parse(oldest)))
  return { statusCode: 200, headers: out, body: Readable.from([bytes]) }
}

const DECODERS: Record<string, (b: Buffer) => Buffer> = {
  identity: (b) => b,
  gzip: (b) => gunzipSync(b, { maxOutputLength: 8 * MAX_MUNGED_BYTES }),
  'x-gzip': (b) => gunzipSync(b, { maxOutputLength: 8 * MAX_MUNGED_BYTES }),
  deflate: (b) => inflateSync(b, { maxOutputLength: 8 * MAX_MUNGED_BYTES }),
  br: (b) => brotliDecompressSync(b, { maxOutputLength: 8 * MAX_MUNGED_BYTES }),
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name]
  return typeof v === 'string' ? v : undefined
}

/** the whole body when it is at most `max` bytes; otherwise `rest`, a stream of everything (what was read, then the remainder) */
async function readUpTo(body: Readable, max: number): Promise<{ bytes: Buffer; rest?: undefined } | { bytes?: undefined; rest: Readable }> {
  const chunks: Buffer[] = []
  let size = 0
  const it = body[Symbol.asyncIterator]()
  for (;;) {
    const { value, done } = await it.next()
    if (done) return { bytes: Buffer.concat(chunks) }
    chunks.push(value)
    size += value.length
    if (size > max) {
      const rest = async function* () {
        yield* chunks
        for (;;) {
          const next = await it.next()
          if (next.done) return
          yield next.value
        }
      }
      return { rest: Readable.from(rest()) }
    }
  }
}
