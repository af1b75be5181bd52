// The account page's "Download your data": the account's repository, blobs, preferences and a
// manifest as one tar archive (account/export.ts). It hands over private data (preferences, birth
// date) in bulk, so it asks for a password confirmed moments ago, as sensitive changes do; a
// deactivated account may still take its data with it.
import { beginExport, exportName, writeTar } from '../../account/export.js'
import { action, type AccountKit, type AccountRowDef } from './kit.js'

export function dataRows(kit: AccountKit): AccountRowDef[] {
  const { db, blobstore, logger } = kit.deps
  return [
    action(
      'export',
      'fresh-password',
      'data',
      async ({ account }) => {
        // refusals (a repository that cannot be read) come back to the section before any byte is sent
        const exp = await beginExport({ db, blobstore }, account.did)
        const name = exportName(exp.handle)
        return {
          kind: 'download',
          filename: `${name}.tar`,
          contentType: 'application/x-tar',
          write: async (out) => {
            await writeTar(exp, name, out).catch((err: unknown) => {
              logger.warn({ err, did: exp.did }, 'account export failed midway')
              throw err
            })
          },
        }
      },
      { statuses: ['active', 'deactivated'] },
    ),
  ]
}
