// com.atproto.server.getServiceAuth: a short-lived token another service (or this one) accepts
// as the caller: ES256K with the repository key for another service, HS256 for this one.
// lxm=createAccount needs a privileged session: the registry row says so.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { mintServiceAuth } from '../../../../auth/service-auth.js'

export default (api: Server, deps: Pick<Services, 'db' | 'tokenKeys'>) =>
  api.com.atproto.server.getServiceAuth<AuthFor<'com.atproto.server.getServiceAuth'>>(async ({ auth, params }) => ({
    encoding: 'application/json',
    body: {
      token: await mintServiceAuth(deps, {
        iss: auth.credentials.did,
        aud: params.aud,
        lxm: params.lxm,
        exp: params.exp,
      }),
    },
  }))
