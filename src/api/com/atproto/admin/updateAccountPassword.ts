// com.atproto.admin.updateAccountPassword: sets the main password and, as a reset does, ends the
// account's access (every session, OAuth grant and app password); the owner is told.
import { method } from '#src/api/method.js'
import type { Services } from '#src/context.js'
import { accountByDid } from '#src/account/admin-views.js'
import { changePassword, checkPasswordLength } from '#src/account/password.js'

export default method(
  'com.atproto.admin.updateAccountPassword',
  (deps: Pick<Services, 'db' | 'mailer' | 'config' | 'logger'>) =>
    async ({ input }) => {
      const { did, password } = input.body
      checkPasswordLength(password)
      await accountByDid(deps.db, did)
      await changePassword(deps, did, password, 'operator')
    },
)
