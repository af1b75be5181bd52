// What the write handlers of a permissioned repo share: the target (the caller's own repo, else
// 403 Forbidden), what the caller's grant lets it write, and the answer of a one-record write.
import type { AccessAuth } from '../auth/verifier.js'
import { missingPermission } from '../auth/permissions.js'
import { spaceError } from './errors.js'
import { parseSpaceRef, type SpaceRef } from './refs.js'
import type { MayWrite, SpaceWriteResult } from './repo-write.js'

export function spaceWriteTarget(
  auth: AccessAuth,
  body: { space: string; repo: string },
): { space: SpaceRef; did: string; mayWrite: MayWrite } {
  const space = parseSpaceRef(body.space)
  const creds = auth.credentials
  if (body.repo !== creds.did) throw spaceError('Forbidden', 'A space write goes to the repo of the authenticated account only')
  const { authority, type, skey } = space
  // a password session holds every permission; an OAuth grant is asked per action and collection
  const mayWrite: MayWrite = creds.oauth
    ? (action, collection) =>
        missingPermission(creds.scope, [{ kind: 'space', space: { authority, type, skey }, asks: [{ action, collection }] }], creds.did) ===
        undefined
    : () => true
  return { space, did: creds.did, mayWrite }
}

/** createRecord and putRecord: `{uri, cid, validationStatus?}` */
export function writeAnswer(r: SpaceWriteResult | undefined) {
  if (!r || r.action === 'delete') throw new Error('a record write answered without its record')
  return {
    encoding: 'application/json' as const,
    body: { uri: r.uri, cid: r.cid, ...(r.validationStatus ? { validationStatus: r.validationStatus } : {}) },
  }
}
