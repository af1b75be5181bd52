// What a scope lets an app do, in plain words for the consent page. Every scope is parsed with the
// official permission parser, so a form it does not understand is shown as such, never guessed at.
import {
  AccountPermission,
  BlobPermission,
  IdentityPermission,
  IncludeScope,
  isStaticScopeValue,
  RepoPermission,
  RpcPermission,
} from '@atproto/oauth-scopes'
import { describeSpaceScope, isSpaceScope, parseSpaceScope } from '../space/scope.js'
import { wordsContext, type SpaceWords } from './space-types.js'

export type PermissionKind =
  'identity' | 'records' | 'spaces' | 'files' | 'email' | 'handle' | 'chat' | 'services' | 'account' | 'sets' | 'other'

/** what the consent page shows for a permission set an `include:` scope names */
export type PermissionSetInfo = { nsid: string; title?: string; detail?: string; permissions: string[] }

export type ConsentGroup = { kind: PermissionKind; title: string; items: string[] }
export type ConsentSet = { nsid: string; title: string; detail?: string; items: string[] }
/** `warnings`: permissions the page shows prominently (any kind of space, whoever owns it) */
export type ConsentWords = { groups: ConsentGroup[]; sets: ConsentSet[]; warnings: string[] }

const GROUP_TITLES: Record<PermissionKind, string> = {
  identity: 'Who you are',
  records: 'Posts, likes, follows and other records',
  spaces: 'Spaces (shared, non-public data)',
  files: 'Files',
  email: 'Email',
  handle: 'Handle and identity',
  chat: 'Chat',
  services: 'Services',
  account: 'Account status',
  sets: 'Permission sets',
  other: 'Other permissions',
}
const ORDER = Object.keys(GROUP_TITLES) as PermissionKind[]

const COLLECTIONS: Record<string, string> = {
  'app.bsky.feed.post': 'posts',
  'app.bsky.feed.like': 'likes',
  'app.bsky.feed.repost': 'reposts',
  'app.bsky.graph.follow': 'follows',
  'app.bsky.graph.block': 'blocks',
  'app.bsky.graph.list': 'lists',
  'app.bsky.graph.listitem': 'list members',
  'app.bsky.actor.profile': 'your profile',
  'app.bsky.feed.generator': 'feeds',
  'app.bsky.feed.threadgate': 'reply settings',
  'app.bsky.feed.postgate': 'quote settings',
  'chat.bsky.actor.declaration': 'chat settings',
}

const list = (words: string[]) => (words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`)
const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1)

function repoWords(p: RepoPermission): string {
  const verbs = { create: 'create', update: 'change', delete: 'delete' }
  const actions = list(p.action.map((a) => verbs[a]))
  const what = p.collection.includes('*')
    ? 'any of your records'
    : list(p.collection.map((c) => (COLLECTIONS[c] ? `your ${COLLECTIONS[c].replace(/^your /, '')}` : `your “${c}” records`)))
  return `${cap(actions)} ${what}`
}

function audWords(aud: string): string {
  if (aud === '*') return 'any service'
  const [did, service] = aud.split('#')
  return service ? `${did} (${service})` : did
}

function rpcWords(p: RpcPermission): string {
  const where = audWords(p.aud)
  if (p.lxm.includes('*')) return `Use any method of ${where} on your behalf`
  return `Use ${list(p.lxm.map((l) => `“${l}”`))} at ${where} on your behalf`
}

function blobWords(p: BlobPermission): string {
  const kinds = p.accept.map((a) =>
    a === '*/*'
      ? 'files of any type'
      : a === 'image/*'
        ? 'images'
        : a === 'video/*'
          ? 'videos'
          : a === 'audio/*'
            ? 'audio'
            : `“${a}” files`,
  )
  return `Upload ${list(kinds)}`
}

function accountWords(p: AccountPermission): [PermissionKind, string] {
  const manage = p.action.includes('manage')
  if (p.attr === 'email') return ['email', manage ? 'See and change your email address' : 'See your email address']
  if (p.attr === 'repo') return ['account', manage ? 'Import data into your repository' : 'See the state of your repository']
  return ['account', manage ? 'Deactivate and reactivate your account' : 'See whether your account is active']
}

/** the words for one scope: its group and item, or undefined when it adds nothing to show */
function wordsFor(scope: string, spaces?: SpaceWords): Array<[PermissionKind, string]> {
  if (isStaticScopeValue(scope)) {
    switch (scope) {
      case 'atproto':
        return [['identity', 'Know who you are on the network (your DID and handle)']]
      case 'transition:generic':
        return [
          ['records', 'Create, change and delete any of your records'],
          ['files', 'Upload files of any type'],
          ['services', 'Use other services on your behalf (except chat)'],
          ['account', 'Change most account settings (not your email or password)'],
        ]
      case 'transition:email':
        return [['email', 'See your email address']]
      case 'transition:chat.bsky':
        return [['chat', 'Read and send your Bluesky chat messages']]
    }
  }
  const space = spaceWordsFor(scope, spaces)
  if (space) return [['spaces', space.text]]
  const repo = RepoPermission.fromString(scope)
  if (repo) return [['records', repoWords(repo)]]
  const rpc = RpcPermission.fromString(scope)
  if (rpc) return [[rpc.lxm.some((l) => l.startsWith('chat.bsky.')) ? 'chat' : 'services', rpcWords(rpc)]]
  const blob = BlobPermission.fromString(scope)
  if (blob) return [['files', blobWords(blob)]]
  const account = AccountPermission.fromString(scope)
  if (account) return [accountWords(account)]
  const identity = IdentityPermission.fromString(scope)
  if (identity) {
    return [
      [
        'handle',
        identity.attr === 'handle'
          ? 'Change your handle'
          : 'Change your handle and your whole identity (the keys and the server your DID document names)',
      ],
    ]
  }
  return [['other', `A permission this server cannot describe: ${scope}`]]
}

function spaceWordsFor(scope: string, spaces: SpaceWords | undefined) {
  if (!isSpaceScope(scope)) return undefined
  try {
    const parsed = parseSpaceScope(scope)
    return describeSpaceScope(parsed, wordsContext(parsed, spaces))
  } catch {
    return undefined
  }
}

const WILD_SPACES = 'Careful: this app asks for every kind of space, whoever owns it — that reaches every space you belong to.'

/**
 * `scope` (space-separated) in plain words, grouped by kind; `include:` scopes by their set;
 * `space:` scopes with their type's declared name and their authority's handle from `spaces`
 */
export function consentWords(scope: string, sets: PermissionSetInfo[] = [], spaces?: SpaceWords): ConsentWords {
  const byKind = new Map<PermissionKind, string[]>()
  const add = (kind: PermissionKind, item: string) => {
    const items = byKind.get(kind) ?? []
    if (!items.includes(item)) items.push(item)
    byKind.set(kind, items)
  }
  const outSets: ConsentSet[] = []
  for (const s of new Set(scope.split(' ').filter(Boolean))) {
    const include = IncludeScope.fromString(s)
    if (include) {
      const info = sets.find((x) => x.nsid === include.nsid)
      outSets.push({
        nsid: include.nsid,
        title: info?.title ?? `Permissions defined by ${include.nsid}`,
        detail: info?.detail,
        items: (info?.permissions ?? []).flatMap((p) => wordsFor(p, spaces).map(([, w]) => w)),
      })
      continue
    }
    for (const [kind, item] of wordsFor(s, spaces)) add(kind, item)
  }
  const groups = ORDER.filter((k) => byKind.has(k)).map((kind) => ({ kind, title: GROUP_TITLES[kind], items: byKind.get(kind)! }))
  // a set's space permissions name a concrete type, so only a direct one can be this wide
  const wild = [...new Set(scope.split(' '))].some((s) => spaceWordsFor(s, spaces)?.warning)
  return { groups, sets: outSets, warnings: wild ? [WILD_SPACES] : [] }
}
