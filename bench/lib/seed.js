#!/usr/bin/env node
// Seeding for `make bench-scale`: N accounts written straight into the store of a server that is
// not running, through the project's own code (dist/: the account, PLC log, event and empty
// repository writes of createAccount, in transactions of 200 accounts), so a large state costs
// seconds, not one password hash per account: every account gets one precomputed hash of
// SEED_PASSWORD and one shared signing key. Not a product path: the bench only.
//
//   node bench/lib/seed.js <from> <count>    (the server's PDS_* environment)
//   node bench/lib/seed.js empty <did>       the repository's records and references removed, so
//                                            importRepo (which takes only an empty repository)
//                                            can run again: emptying a million records through
//                                            applyWrites costs as much as writing them
import { Secp256k1Keypair } from '@atproto/crypto'
import { hashPassword } from '../../dist/account/password.js'
import { loadConfig } from '../../dist/config.js'
import { openDb } from '../../dist/db/index.js'
import { appendOp, didForGenesis, signOp } from '../../dist/identity/plc.js'
import { createEmptyRepo } from '../../dist/repo/writer.js'
import { accountEvent, identityEvent } from '../../dist/sequencer/index.js'

const SEED_PASSWORD = 'bench-scale-password'
const seedHandle = (i) => `s${i}x.test`

const config = loadConfig(process.env)
const db = await openDb(config.db)
if (process.argv[2] === 'empty') {
  const did = process.argv[3]
  await db.transact(async (trx) => {
    await trx.deleteFrom('record_blob').where('did', '=', did).execute()
    await trx.deleteFrom('record').where('did', '=', did).execute()
  })
  await db.destroy()
  process.exit(0)
}
const [from, count] = process.argv.slice(2).map(Number)
const rotationKey = await Secp256k1Keypair.import(config.secrets.plcRotationKey)
const signingKey = await Secp256k1Keypair.create({ exportable: true })
const privateHex = Buffer.from(await signingKey.export()).toString('hex')
const passwordHash = await hashPassword(SEED_PASSWORD)
// a key's did:key decompresses its point each time it is asked for (more than a signature costs)
const rotationDid = rotationKey.did()
const signingDid = signingKey.did()
const signingMultibase = signingDid.replace(/^did:key:/, '')
const now = new Date().toISOString()
const BATCH = 200
for (let start = from; start < from + count; start += BATCH) {
  const end = Math.min(from + count, start + BATCH)
  const ops = []
  for (let i = start; i < end; i++) {
    const handle = seedHandle(i)
    const signed = await signOp(
      {
        type: 'plc_operation',
        rotationKeys: [rotationDid],
        verificationMethods: { atproto: signingDid },
        alsoKnownAs: [`at://${handle}`],
        services: { atproto_pds: { type: 'AtprotoPersonalDataServer', endpoint: config.publicUrl } },
        prev: null,
      },
      rotationKey,
    )
    ops.push({ handle, signed, did: didForGenesis(signed) })
  }
  await db.transact(async (trx) => {
    for (const { handle, signed, did } of ops) {
      await trx
        .insertInto('account')
        .values({
          did,
          handle,
          email: `${handle}@example.com`,
          email_confirmed_at: null,
          password_hash: passwordHash,
          status: 'active',
          migration_state: 'none',
          created_at: now,
          status_changed_at: null,
          takedown_ref: null,
          invites_disabled: 0,
        })
        .execute()
      await trx.insertInto('signing_key').values({ did, private_key_hex: privateHex, public_key_multibase: signingMultibase }).execute()
      await appendOp(trx, did, 0, signed)
      await identityEvent(trx, did, handle)
      await accountEvent(trx, did, 'active')
      await createEmptyRepo(trx, did, signingKey)
    }
  })
}
await db.destroy()
