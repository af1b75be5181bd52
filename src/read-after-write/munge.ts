// What each read-after-write method changes in the AppView's answer, given the requester's own
// records the AppView has not indexed: a newer profile record replaces the requester's name,
// avatar, description and banner wherever the requester appears as a profile; new posts join the
// requester's own author feed and timeline (first page only) and the threads they reply into.
import type { RecentRecord } from '../repo/read.js'
import type { LocalViews } from './views.js'

type Json = Record<string, any>
export type LocalRecords = { profile?: RecentRecord; posts: RecentRecord[] }
export type Munge = (
  views: LocalViews,
  original: Json,
  local: LocalRecords,
  call: { did: string; handle: string; params: URLSearchParams },
) => Promise<Json>

const isOwnActor = (actor: string | null, call: { did: string; handle: string }) =>
  actor !== null && (actor === call.did || actor.toLowerCase() === call.handle)

export const getProfile: Munge = async (views, original, local, { did }) => {
  if (!local.profile || original.did !== did) return original
  return views.updateProfileDetailed(original, local.profile.value)
}

export const getProfiles: Munge = async (views, original, local, { did }) => {
  const profile = local.profile
  if (!profile) return original
  return {
    ...original,
    profiles: original.profiles.map((p: Json) => (p.did === did ? views.updateProfileDetailed(p, profile.value) : p)),
  }
}

/** the requester's profile as author of feed items */
function withOwnAuthor(views: LocalViews, feed: Json[], local: LocalRecords, did: string): Json[] {
  const profile = local.profile
  if (!profile) return feed
  return feed.map((item) =>
    item.post?.author?.did === did
      ? { ...item, post: { ...item.post, author: views.updateProfileViewBasic(item.post.author, profile.value) } }
      : item,
  )
}

export const getActorLikes: Munge = async (views, original, local, { did }) => ({
  ...original,
  feed: withOwnAuthor(views, original.feed, local, did),
})

export const getAuthorFeed: Munge = async (views, original, local, call) => {
  if (!isOwnActor(call.params.get('actor'), call)) return original
  let feed = withOwnAuthor(views, original.feed, local, call.did)
  // a later page already lies below the new posts
  if (!call.params.get('cursor')) feed = await views.insertIntoFeed(feed, local.posts.filter(authorFeedFilter(call.params.get('filter'))))
  return { ...original, feed }
}

/** which new posts an author feed with this filter lists */
function authorFeedFilter(filter: string | null): (p: RecentRecord) => boolean {
  const isReply = (p: RecentRecord) => p.value.reply !== undefined
  const hasImages = (p: RecentRecord) => {
    const embed = p.value.embed as Json | undefined
    return embed?.$type === 'app.bsky.embed.images' || embed?.media?.$type === 'app.bsky.embed.images'
  }
  switch (filter) {
    case 'posts_no_replies':
    case 'posts_and_author_threads':
      return (p) => !isReply(p)
    case 'posts_with_media':
      return hasImages
    case 'posts_with_video':
      return () => false
    default:
      return () => true
  }
}

export const getTimeline: Munge = async (views, original, local, call) => {
  if (call.params.get('cursor')) return original
  return { ...original, feed: await views.insertIntoFeed(original.feed, local.posts) }
}

export const getPostThread: Munge = async (views, original, local) => {
  if (original.thread?.$type !== 'app.bsky.feed.defs#threadViewPost') return original
  return { ...original, thread: await addRepliesToThread(views, original.thread, local.posts) }
}

/** the new posts replying somewhere inside `thread`, each placed under its parent */
export async function addRepliesToThread(views: LocalViews, thread: Json, posts: RecentRecord[]): Promise<Json> {
  const root = thread.post?.record?.reply?.root?.uri ?? thread.post?.uri
  let out = thread
  for (const post of posts) {
    if ((post.value.reply as Json | undefined)?.root?.uri !== root) continue
    out = await insertReply(views, out, post)
  }
  return out
}

async function insertReply(views: LocalViews, view: Json, post: RecentRecord): Promise<Json> {
  if ((post.value.reply as Json).parent?.uri === view.post.uri) {
    if ((view.replies ?? []).some((r: Json) => r.post?.uri === post.uri)) return view
    const reply = { $type: 'app.bsky.feed.defs#threadViewPost', post: await views.postView(post) }
    return { ...view, replies: [reply, ...(view.replies ?? [])] }
  }
  if (!view.replies) return view
  const replies = []
  for (const r of view.replies) {
    replies.push(r.$type === 'app.bsky.feed.defs#threadViewPost' ? await insertReply(views, r, post) : r)
  }
  return { ...view, replies }
}
