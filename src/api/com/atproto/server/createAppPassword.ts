// com.atproto.server.createAppPassword: the plaintext is in this response and nowhere else; the
// owner is mailed that an app password was created (its name, never the secret).
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { createAppPassword } from '../../../../account/app-passwords.js'

export default (api: Server, deps: Pick<Services, 'db' | 'mailer' | 'config' | 'logger'>) =>
  api.com.atproto.server.createAppPassword<AuthFor<'com.atproto.server.createAppPassword'>>(async ({ auth, input }) => ({
    encoding: 'application/json',
    body: await createAppPassword(deps, auth.credentials.did, input.body.name, !!input.body.privileged),
  }))
