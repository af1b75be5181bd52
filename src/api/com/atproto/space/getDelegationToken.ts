// com.atproto.space.getDelegationToken: "this app acts for this user" in the space, for its authority's
// host; says nothing about membership. App passwords are refused: it wants the account's full access.
import { method } from '#src/api/method.js'
import { xrpcError } from '#src/errors.js'
import { k256Keypair } from '#src/identity/k256.js'
import { parseSpaceRef } from '#src/space/refs.js'
import { mintDelegationToken } from '#src/space/tokens.js'

export default method('com.atproto.space.getDelegationToken', ({ db }) => async ({ auth, params }) => {
  const space = parseSpaceRef(params.space)
  const { did, appPassword } = auth.credentials
  if (appPassword) throw xrpcError('InsufficientScope', 'Delegation tokens are not given to app-password sessions')
  const key = await db.selectFrom('signing_key').select('private_key_hex').where('did', '=', did).executeTakeFirst()
  if (!key) throw xrpcError('InvalidRequest', 'This account has no signing key on this server')
  const token = await mintDelegationToken({ user: did, space: space.uri, signer: await k256Keypair(key.private_key_hex) })
  return { encoding: 'application/json', body: { token } }
})
