"""Work on a stopped broker's stored state, run by the portal's periodic jobs.

It sits above both the store (whose rows it changes, under the store's ownership rules)
and core (whose rules decide what happens to those rows), so neither of them has to
import the other's way round.
"""
