// com.atproto.space.getSpaceCredential: exchanges a user's delegation token (and the app's DPoP key)
// for a credential of the space, when the space's app and user policies admit them.
import { method } from '#src/api/method.js'
import { k256Keypair } from '#src/identity/k256.js'
import { spaceError } from '#src/space/errors.js'
import { admitsApp, admitsUser, authorityStatus, spaceConfig } from '#src/space/host.js'
import { verifyClientAttestation } from '#src/space/attestation.js'
import { parseSpaceRef } from '#src/space/refs.js'
import { mintSpaceCredential, requireDelegationFor } from '#src/space/tokens.js'

export default method('com.atproto.space.getSpaceCredential', (deps) => async ({ auth, input }) => {
  const { claims, jkt } = auth.credentials
  const space = parseSpaceRef(input.body.space)
  requireDelegationFor(claims, space.uri)
  // a deleted authority's spaces are tombstones (SpaceDeleted below); a switched-off one's are not served
  const status = await authorityStatus(deps.db, space.authority)
  if (!status) throw spaceError('SpaceNotFound', 'This server does not host that space')
  const clientId =
    input.body.clientAttestation === undefined ? undefined : await verifyClientAttestation(deps, input.body.clientAttestation, space)
  const config = await spaceConfig(deps.db, space)
  if (config?.deleted) throw spaceError('SpaceDeleted', 'The space was deleted')
  if (!config) throw spaceError('SpaceNotFound', 'No such space')
  if (status !== 'active') throw spaceError('SpaceNotFound', `The space's authority is ${status}`)
  if (!admitsApp(config, clientId)) throw spaceError('AppNotAuthorized', 'The space does not admit this app')
  if (!(await admitsUser(deps, config, claims.iss, clientId))) throw spaceError('UserNotAuthorized', 'The space does not admit this user')
  const key = await deps.db.selectFrom('signing_key').select('private_key_hex').where('did', '=', space.authority).executeTakeFirst()
  if (!key) throw spaceError('SpaceNotFound', 'This server does not hold the authority key of that space')
  const credential = await mintSpaceCredential({ space: space.uri, jkt, signer: await k256Keypair(key.private_key_hex) })
  return { encoding: 'application/json', body: { credential } }
})
