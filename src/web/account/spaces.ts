// The spaces a person has on this server, for the account page: those they created (the
// authority of a live space config) and those they belong to here or wrote in (a member of a
// local space, or the owner of a permissioned repo in it). Bounded: a page, not an export.
import type { Store } from '../../db/schema.js'
import { parseSpaceRef } from '../../space/refs.js'

const MAX = 200

/** one space as the page lists it; `owner` is the authority's handle when it is an account here */
export type SpaceView = { uri: string; type: string; skey: string; authority: string; owner?: string; member: boolean; wrote: boolean }

export type SpacesView = { owned: SpaceView[]; joined: SpaceView[] }

export async function spacesOf(db: Store, did: string): Promise<SpacesView> {
  const owned = await db
    .selectFrom('space_config')
    .select(['space', 'type'])
    .where('authority', '=', did)
    .where('deleted_at', 'is', null)
    .orderBy('space')
    .limit(MAX)
    .execute()
  const memberOf = await db
    .selectFrom('space_member')
    .innerJoin('space_config', 'space_config.space', 'space_member.space')
    .select(['space_config.space as space'])
    .where('space_member.did', '=', did)
    .where('space_config.deleted_at', 'is', null)
    .orderBy('space_config.space')
    .limit(MAX)
    .execute()
  const wroteIn = await db.selectFrom('space_repo').select('space').where('did', '=', did).orderBy('space').limit(MAX).execute()

  const joined = new Map<string, SpaceView>()
  const add = (uri: string, what: 'member' | 'wrote') => {
    const view = joined.get(uri) ?? viewOf(uri)
    if (!view || view.authority === did) return
    view[what] = true
    joined.set(uri, view)
  }
  for (const r of memberOf) add(r.space, 'member')
  for (const r of wroteIn) add(r.space, 'wrote')
  const authorities = [...new Set([...joined.values()].map((v) => v.authority))]
  const handles = new Map(
    authorities.length
      ? (
          await db
            .selectFrom('account')
            .select(['did', 'handle'])
            .where('did', 'in', authorities)
            .where('status', '!=', 'deleted')
            .execute()
        ).map((a) => [a.did, a.handle] as const)
      : [],
  )
  return {
    owned: owned.map((r) => viewOf(r.space)).filter((v): v is SpaceView => v !== undefined),
    joined: [...joined.values()]
      .map((v) => ({ ...v, owner: handles.get(v.authority) ?? undefined }))
      .sort((a, b) => (a.uri < b.uri ? -1 : 1)),
  }
}

function viewOf(uri: string): SpaceView | undefined {
  try {
    const ref = parseSpaceRef(uri)
    return { uri, type: ref.type, skey: ref.skey, authority: ref.authority, member: false, wrote: false }
  } catch {
    // a row this server wrote is always a space reference; anything else is not shown
    return undefined
  }
}
