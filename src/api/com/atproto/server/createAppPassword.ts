// com.atproto.server.createAppPassword: the plaintext is in this response and nowhere else; the
// owner is mailed that an app password was created (its name, never the secret).
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { createAppPassword } from '#src/account/app-passwords.js'

export default method(
  'com.atproto.server.createAppPassword',
  (deps: Pick<Services, 'db' | 'mailer' | 'config' | 'logger'>) =>
    async ({ auth, input }) => ({
      encoding: 'application/json',
      body: await createAppPassword(deps, auth.credentials.did, input.body.name, !!input.body.privileged),
    }),
)
