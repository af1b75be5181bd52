// com.atproto.server.getServiceAuth: a short-lived token another service (or this one) accepts
// as the caller: ES256K with the repository key for another service, HS256 for this one.
// lxm=createAccount needs a privileged session: the registry row says so.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { mintServiceAuth } from '#src/auth/service-auth.js'

export default method('com.atproto.server.getServiceAuth', (deps: Pick<Services, 'db' | 'tokenKeys'>) => async ({ auth, params }) => ({
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
