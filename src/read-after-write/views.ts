// Views of the requester's own records the AppView has not indexed yet, in the AppView's shapes
// (app.bsky.actor.defs, app.bsky.feed.defs, app.bsky.embed.*): counts are zero, as they are just
// after a record is created; image URLs point at the AppView's CDN when its pattern is configured,
// else at this server's getBlob; an embedded record is looked up at the AppView.
import { format } from 'node:util'
import type { Services } from '../context.js'
import { mintServiceAuth } from '../auth/service-auth.js'
import { readCapped, request } from '../outbound.js'
import type { RecentRecord } from '../repo/read.js'

type Json = Record<string, any>
export type ViewDeps = Pick<Services, 'config' | 'db' | 'tokenKeys' | 'logger'>

/** embedded views fetched from the AppView are small: one post, feed or list each */
const MAX_EMBED_BYTES = 256 * 1024

export class LocalViews {
  constructor(
    private deps: ViewDeps,
    readonly did: string,
    private handle: string,
    /** the requester's profile record as it is here now (undefined: none) */
    private profile: Json | undefined,
  ) {}

  imageUrl(kind: string, cid: string): string {
    const pattern = this.deps.config.appView?.cdnUrlPattern
    if (pattern) return format(pattern, kind, this.did, cid)
    const q = new URLSearchParams({ did: this.did, cid })
    return `${this.deps.config.publicUrl}/xrpc/com.atproto.sync.getBlob?${q}`
  }

  private blobUrl(kind: string, blob: unknown): string | undefined {
    const cid = blobCid(blob)
    return cid ? this.imageUrl(kind, cid) : undefined
  }

  profileBasic(): Json {
    return withoutUndefined({
      did: this.did,
      handle: this.handle,
      displayName: this.profile?.displayName,
      avatar: this.blobUrl('avatar', this.profile?.avatar),
    })
  }

  updateProfileViewBasic(view: Json, record: Json): Json {
    return withoutUndefined({ ...view, displayName: record.displayName, avatar: this.blobUrl('avatar', record.avatar) })
  }

  updateProfileView(view: Json, record: Json): Json {
    return withoutUndefined({ ...this.updateProfileViewBasic(view, record), description: record.description })
  }

  updateProfileDetailed(view: Json, record: Json): Json {
    return withoutUndefined({ ...this.updateProfileView(view, record), banner: this.blobUrl('banner', record.banner) })
  }

  async postView(rec: RecentRecord): Promise<Json> {
    const embed = rec.value.embed ? await this.embedView(rec.value.embed) : undefined
    return withoutUndefined({
      uri: rec.uri,
      cid: rec.cid,
      author: this.profileBasic(),
      record: rec.value,
      embed,
      replyCount: 0,
      repostCount: 0,
      likeCount: 0,
      quoteCount: 0,
      indexedAt: rec.indexedAt,
    })
  }

  /** the local posts newer than the feed's last item, newest first, each placed by time */
  async insertIntoFeed(feed: Json[], posts: RecentRecord[]): Promise<Json[]> {
    if (posts.length === 0) return feed
    const last = feed.at(-1)?.post?.indexedAt ?? new Date(0).toISOString()
    const out = [...feed]
    for (const rec of posts.filter((p) => p.indexedAt > last).reverse()) {
      const post = await this.postView(rec)
      const at = out.findIndex((item) => item.post.indexedAt < post.indexedAt)
      if (at >= 0) out.splice(at, 0, { post })
      else out.push({ post })
    }
    return out
  }

  private async embedView(embed: Json): Promise<Json | undefined> {
    switch (embed.$type) {
      case 'app.bsky.embed.images':
        return this.imagesView(embed)
      case 'app.bsky.embed.external':
        return this.externalView(embed)
      case 'app.bsky.embed.record':
        return this.recordView(embed)
      case 'app.bsky.embed.recordWithMedia': {
        const media =
          embed.media?.$type === 'app.bsky.embed.images'
            ? this.imagesView(embed.media)
            : embed.media?.$type === 'app.bsky.embed.external'
              ? this.externalView(embed.media)
              : undefined
        if (!media) return undefined
        return { $type: 'app.bsky.embed.recordWithMedia#view', record: await this.recordView(embed.record), media }
      }
      default:
        // video needs the AppView's playlist: left for the AppView to render once it has indexed the post
        return undefined
    }
  }

  private imagesView(embed: Json): Json {
    const images = (embed.images ?? []).map((img: Json) =>
      withoutUndefined({
        thumb: this.blobUrl('feed_thumbnail', img.image),
        fullsize: this.blobUrl('feed_fullsize', img.image),
        alt: img.alt ?? '',
        aspectRatio: img.aspectRatio,
      }),
    )
    return { $type: 'app.bsky.embed.images#view', images }
  }

  private externalView(embed: Json): Json {
    const { uri, title, description, thumb } = embed.external ?? {}
    return {
      $type: 'app.bsky.embed.external#view',
      external: withoutUndefined({ uri, title, description, thumb: this.blobUrl('feed_thumbnail', thumb) }),
    }
  }

  private async recordView(embed: Json): Promise<Json> {
    const uri: string = embed.record?.uri
    const found = uri ? await this.embeddedRecord(uri).catch(() => undefined) : undefined
    return { $type: 'app.bsky.embed.record#view', record: found ?? { $type: 'app.bsky.embed.record#viewNotFound', uri, notFound: true } }
  }

  private async embeddedRecord(uri: string): Promise<Json | undefined> {
    const collection = uri.split('/')[3]
    if (collection === 'app.bsky.feed.post') {
      const data = await this.appView('app.bsky.feed.getPosts', { uris: uri })
      const post = data?.posts?.[0]
      if (!post) return undefined
      return withoutUndefined({
        $type: 'app.bsky.embed.record#viewRecord',
        uri: post.uri,
        cid: post.cid,
        author: post.author,
        value: post.record,
        labels: post.labels,
        embeds: post.embed ? [post.embed] : undefined,
        indexedAt: post.indexedAt,
      })
    }
    if (collection === 'app.bsky.feed.generator') {
      const data = await this.appView('app.bsky.feed.getFeedGenerator', { feed: uri })
      return data?.view ? { ...data.view, $type: 'app.bsky.feed.defs#generatorView' } : undefined
    }
    if (collection === 'app.bsky.graph.list') {
      const data = await this.appView('app.bsky.graph.getList', { list: uri })
      return data?.list ? { ...data.list, $type: 'app.bsky.graph.defs#listView' } : undefined
    }
    return undefined
  }

  /** a query to the AppView as the requester (its service token), bounded in time and size */
  async appView(nsid: string, params: Record<string, string>): Promise<Json | undefined> {
    const appView = this.deps.config.appView
    if (!appView) return undefined
    const jwt = await mintServiceAuth(this.deps, { iss: this.did, aud: appView.did, lxm: nsid })
    const res = await request(`${appView.url}/xrpc/${nsid}?${new URLSearchParams(params)}`, {
      headers: { authorization: `Bearer ${jwt}`, accept: 'application/json' },
      headersTimeout: this.deps.config.proxy.timeoutMs,
      bodyTimeout: this.deps.config.proxy.timeoutMs,
    })
    const body = await readCapped(res.body, MAX_EMBED_BYTES)
    if (res.statusCode !== 200 || !body) return undefined
    return JSON.parse(body.toString('utf8'))
  }
}

/** a blob reference's CID, typed ({ref: {$link}}) or legacy ({cid}) */
function blobCid(blob: unknown): string | undefined {
  const b = blob as Json | undefined
  if (!b || typeof b !== 'object') return undefined
  if (typeof b.ref?.$link === 'string') return b.ref.$link
  if (typeof b.cid === 'string') return b.cid
  return undefined
}

function withoutUndefined(o: Json): Json {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k]
  return o
}
