"""What ``benchmarks/text_time_to_loss.py`` measured (written by it, not by hand).

``TIME_TO_LOSS`` holds the runs of ``python -m scratchformer.train --task text`` (held-out bits
per character reached on a budget of process CPU-seconds, BLAS on one thread) and where and
when they ran. The chapter "Language modelling on real text" prints it as a table.
"""

TIME_TO_LOSS = {'machine': {'date': '2026-12-06',
             'commit': '6860fec',
             'cpu': 'AMD EPYC',
             'cores': 2,
             'blas_kernel': 'SkylakeX',
             'numpy': '2.4.6',
             'python': '3.11.7'},
 'runs': [{'tokenizer': 'char',
           'budget_seconds': 180.0,
           'seed': 0,
           'steps': 389,
           'bits_per_char': 2.0013,
           'cpu_seconds': 180.1,
           'sample': 'The state of the Union is dabtrative the sole and grown in the time '
                     'intercount in the act severests mitter. The univicious, the '},
          {'tokenizer': 'bpe',
           'budget_seconds': 180.0,
           'seed': 0,
           'steps': 361,
           'bits_per_char': 1.7131,
           'cpu_seconds': 180.7,
           'sample': 'The state of the Union is not too, strength inform, from tribived to '
                     'refer its disintine Republican coose of the Union the Government of our '
                     'Army and the Departments, and the execute of the creates of the present '
                     "deservice to my responsibilitary and expenditures to adopted. It's need. "
                     'Economrope were made at honing companies and one-reascate, states do'},
          {'tokenizer': 'char',
           'budget_seconds': 600.0,
           'seed': 0,
           'steps': 1355,
           'bits_per_char': 1.6844,
           'cpu_seconds': 600.1,
           'sample': 'The state of the Union is each of the Constitution would be distinct or '
                     'office democracies at any the world since to articles by'},
          {'tokenizer': 'bpe',
           'budget_seconds': 600.0,
           'seed': 0,
           'steps': 1272,
           'bits_per_char': 1.4599,
           'cpu_seconds': 600.2,
           'sample': 'The state of the Union is not too, but he was intended with end, but the '
                     'act of the Union I also be confidently commended. For the deep attempts '
                     'of the Secretary of State has occurred by the affairs of grounds, that '
                     'there are estimated that some time during the year was being seemed and '
                     'representatives under the establishment of these and commerce, have been '
                     'throught stipul'}]}
