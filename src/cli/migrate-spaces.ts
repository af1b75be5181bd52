// `pds migrate` and permissioned repos (Spaces). No server can import a permissioned repo yet, so a
// move cannot carry them: each one (its CAR and blobs) is saved from the origin into a directory,
// and stays on the origin, where the deactivated account still reads its own. The spaces the
// account governs are created again on the destination with their policies and member lists.
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { BLOB_DIR, type ExportedSpaces } from '../account/export.js'
import { MigrateError, type MigrateIo, type Xrpc } from './migrate-xrpc.js'

/** the file the saved permissioned repos are described in, written last (a directory with it is whole) */
export const SPACES_FILE = 'spaces.json'

export const defaultSpacesDir = (did: string) => resolve(`spaces-${did.replace(/[^A-Za-z0-9._-]/g, '_')}`)

export type SavedSpaces = { saved: ExportedSpaces; savedTo?: string }

/**
 * Saves every permissioned repo of `did` on the origin into `dir`: `<n>.car` as space.getRepo
 * gives it, the blobs its records reference under blobs/, and spaces.json describing them and
 * the spaces `did` governs. A directory that already has spaces.json is the earlier run's (the
 * origin may have deactivated the account since, and no longer answers for what it governs).
 */
export async function saveSpaces(origin: Xrpc, did: string, dir: string, io: MigrateIo): Promise<SavedSpaces> {
  const done = await readFile(join(dir, SPACES_FILE), 'utf8').catch(() => undefined)
  if (done !== undefined) {
    const saved = JSON.parse(done) as ExportedSpaces
    io.log(`      already saved in ${dir}: ${saved.repos.length} permissioned repos, ${saved.governed.length} spaces governed`)
    return { saved, savedTo: dir }
  }
  const saved: ExportedSpaces = { repos: [], governed: [] }
  const probe = await origin.call('com.atproto.space.listSpaces', { params: { limit: '1' } })
  if (probe.status !== 200) {
    io.log(`      ${origin.url} keeps no permissioned repos (listSpaces: ${probe.status} ${probe.json?.error ?? ''})`.trimEnd())
    return { saved }
  }
  const uris: string[] = []
  let cursor: string | undefined
  for (let i = 0; i < 10_000; i++) {
    const page = (await origin.ok('com.atproto.space.listSpaces', { params: { limit: '100', ...(cursor ? { cursor } : {}) } })).json
    uris.push(...page.spaces.map((s: { uri: string }) => s.uri))
    cursor = page.cursor
    if (!cursor || !page.spaces.length) break
  }
  if (!uris.length) {
    io.log('      none')
    return { saved }
  }
  await mkdir(join(dir, BLOB_DIR), { recursive: true })
  for (const space of uris) {
    const car = await origin.call('com.atproto.space.getRepo', { params: { space, repo: did } })
    if (car.status === 200) {
      const file = `${String(saved.repos.length + 1).padStart(4, '0')}.car`
      await writeFile(join(dir, file), car.bytes, { mode: 0o600 })
      const blobs: string[] = []
      let after: string | undefined
      for (let i = 0; i < 10_000; i++) {
        const page = (
          await origin.ok('com.atproto.space.listBlobs', {
            params: { space, repo: did, limit: '1000', ...(after ? { cursor: after } : {}) },
          })
        ).json
        for (const cid of page.cids as string[]) {
          const blob = await origin.ok('com.atproto.space.getBlob', { params: { space, repo: did, cid } })
          await writeFile(join(dir, BLOB_DIR, cid), blob.bytes, { mode: 0o600 })
          blobs.push(cid)
        }
        after = page.cursor
        if (!after || !page.cids.length) break
      }
      const records = await countSpaceRecords(origin, space, did)
      const rev = (await origin.ok('com.atproto.space.getLatestCommit', { params: { space, repo: did } })).json.commit.rev
      saved.repos.push({ space, file, rev, records, blobs })
    } else if (car.json?.error !== 'RepoNotFound') {
      throw new MigrateError(`com.atproto.space.getRepo of ${space} on ${origin.url} failed: ${car.status} ${car.json?.error ?? ''}`.trim())
    }
    if (space.startsWith(`at://${did}/`)) {
      const got = await origin.call('com.atproto.simplespace.getSpace', { params: { space } })
      if (got.status === 200) {
        const members: string[] = []
        let after: string | undefined
        for (let i = 0; i < 10_000; i++) {
          const page = (
            await origin.ok('com.atproto.simplespace.listMembers', {
              params: { space, limit: '1000', ...(after ? { cursor: after } : {}) },
            })
          ).json
          members.push(...page.members.map((m: { did: string }) => m.did))
          after = page.cursor
          if (!after || !page.members.length) break
        }
        const parts = space.split('/')
        saved.governed.push({ space, type: parts[4], skey: parts[5], policy: got.json.policy, appAccess: got.json.appAccess, members })
      }
    }
  }
  await writeFile(
    join(dir, SPACES_FILE),
    JSON.stringify({ did, origin: origin.url, savedAt: new Date().toISOString(), ...saved }, null, 2) + '\n',
    {
      mode: 0o600,
    },
  )
  if (saved.repos.length) {
    io.log(`      ${saved.repos.length} permissioned repos saved to ${dir}`)
    io.log('      no server can import a permissioned repo yet: the destination starts without them; they stay on')
    io.log(`      ${origin.url}, where the account (deactivated) still reads its own, until it is deleted there`)
  }
  return { saved, savedTo: dir }
}

async function countSpaceRecords(server: Xrpc, space: string, did: string): Promise<number> {
  let n = 0
  let cursor: string | undefined
  for (let i = 0; i < 10_000; i++) {
    const params = { space, repo: did, limit: '1000', excludeValues: 'true', ...(cursor ? { cursor } : {}) }
    const page = (await server.ok('com.atproto.space.listRecords', { params })).json
    n += page.records.length
    cursor = page.cursor
    if (!cursor || !page.records.length) break
  }
  return n
}

/**
 * The spaces the account governs, created again on the destination (its own account, active)
 * with their policies and member lists, so members' apps find the space where the DID document
 * now points. Already there counts as done; a destination without Spaces is reported, not fatal.
 */
export async function recreateSpaces(dest: Xrpc, saved: ExportedSpaces, io: MigrateIo): Promise<number> {
  let recreated = 0
  for (const g of saved.governed) {
    const res = await dest.call('com.atproto.simplespace.createSpace', {
      body: { type: g.type, skey: g.skey, policy: g.policy, appAccess: g.appAccess },
    })
    if (res.status !== 200 && res.json?.error !== 'SpaceAlreadyExists') {
      io.log(
        `      ${g.space} could not be created on ${dest.url} (${res.status} ${res.json?.error ?? ''}); its policies and members are in the saved copy`,
      )
      continue
    }
    for (const member of g.members) await dest.ok('com.atproto.simplespace.addMember', { body: { space: g.space, did: member } })
    recreated++
  }
  if (saved.governed.length) io.log(`      ${recreated}/${saved.governed.length} governed spaces created on ${dest.url} with their members`)
  return recreated
}
